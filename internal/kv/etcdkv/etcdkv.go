package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Config configures a Store.
type Config struct {
	// Endpoints of the etcd cluster. Ignored when Client is set.
	Endpoints []string
	// Client, if set, is used instead of dialling Endpoints; the Store
	// does not close it.
	Client *clientv3.Client
	// Prefix is put before every key. Default "/registry".
	Prefix string
	// MaxValueSize limits a value's size. Default kv.DefaultMaxValueSize;
	// the etcd cluster's --max-request-bytes must leave room for it.
	MaxValueSize int
	// DialTimeout bounds the first connection. Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds a request whose context has no deadline, so
	// that a lost cluster surfaces as an error. Default 15 s.
	RequestTimeout time.Duration
	// Logger receives connection messages; nil discards them.
	Logger *slog.Logger
}

// Store is a kv.Store over etcd.
type Store struct {
	c       *clientv3.Client
	ownsC   bool
	prefix  string
	maxVal  int
	timeout time.Duration
	log     *slog.Logger

	mu struct {
		sync.Mutex
		closed bool
		// lost is closed, and replaced, whenever the connection to etcd
		// leaves the READY state: open watches end with ErrUnavailable.
		lost chan struct{}
	}
	stop chan struct{}
	wg   sync.WaitGroup
}

// New connects to etcd and returns the store.
func New(cfg Config) (*Store, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/registry"
	}
	if cfg.MaxValueSize == 0 {
		cfg.MaxValueSize = kv.DefaultMaxValueSize
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		c: cfg.Client, prefix: strings.TrimSuffix(cfg.Prefix, "/"), maxVal: cfg.MaxValueSize,
		timeout: cfg.RequestTimeout, log: cfg.Logger, stop: make(chan struct{}),
	}
	if s.c == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, errors.New("etcdkv: no endpoints")
		}
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			// The client's own retry chatter would go to stderr; the store
			// reports what matters through its errors and Logger.
			Logger: zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcdkv: connecting to %v: %w", cfg.Endpoints, err)
		}
		s.c, s.ownsC = c, true
	}
	s.mu.lost = make(chan struct{})
	// Fail fast if the cluster is not there.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	if _, err := s.c.Get(ctx, s.prefix+"/", clientv3.WithCountOnly()); err != nil {
		if s.ownsC {
			s.c.Close()
		}
		return nil, fmt.Errorf("etcdkv: %w", mapErr(err))
	}
	s.wg.Add(1)
	go s.watchConnection()
	return s, nil
}

// watchConnection turns the client connection leaving READY into a
// signal for the open watches, whose streams etcd's client would otherwise
// retry silently.
func (s *Store) watchConnection() {
	defer s.wg.Done()
	conn := s.c.ActiveConnection()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	state := conn.GetState()
	for conn.WaitForStateChange(ctx, state) {
		next := conn.GetState()
		if state == connectivity.Ready && next != connectivity.Ready {
			s.log.Warn("lost the connection to etcd; ending open watches", "state", next.String())
			s.mu.Lock()
			close(s.mu.lost)
			s.mu.lost = make(chan struct{})
			s.mu.Unlock()
		}
		if next == connectivity.Ready && state != connectivity.Ready {
			s.log.Info("connected to etcd")
		}
		state = next
	}
}

func (s *Store) key(k string) string { return s.prefix + k }

// strip turns an etcd key-value into the contract's, without the prefix.
func (s *Store) strip(e *mvccpb.KeyValue) *kv.KeyValue {
	if e == nil {
		return nil
	}
	return &kv.KeyValue{
		Key:            strings.TrimPrefix(string(e.Key), s.prefix),
		Value:          e.Value,
		CreateRevision: e.CreateRevision,
		ModRevision:    e.ModRevision,
		Version:        e.Version,
	}
}

// withTimeout bounds a request whose context has no deadline.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return kv.ErrClosed
	}
	return nil
}

// mapErr translates etcd's errors into the contract's sentinels.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %v", kv.ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %v", kv.ErrFutureRevision, err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrNoLeader):
		return fmt.Errorf("%w: %v", kv.ErrUnavailable, err)
	}
	if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", kv.ErrUnavailable, err)
	}
	return fmt.Errorf("etcdkv: %w", err)
}

// Range implements kv.Store.
func (s *Store) Range(ctx context.Context, key string, opts kv.RangeOptions) (kv.RangeResponse, error) {
	if err := kv.CheckKey(key); err != nil {
		return kv.RangeResponse{}, err
	}
	if err := s.checkOpen(); err != nil {
		return kv.RangeResponse{}, err
	}
	var ops []clientv3.OpOption
	if opts.End != "" {
		ops = append(ops, clientv3.WithRange(s.key(opts.End)))
	}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(opts.Revision))
	}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(opts.Limit))
	}
	if opts.CountOnly {
		ops = append(ops, clientv3.WithCountOnly())
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	r, err := s.c.Get(ctx, s.key(key), ops...)
	if err != nil {
		return kv.RangeResponse{}, mapErr(err)
	}
	resp := kv.RangeResponse{Revision: r.Header.Revision, Count: r.Count, More: r.More}
	if opts.NoCount {
		resp.Count = 0 // as the embedded engine leaves it
	}
	if opts.Revision > 0 {
		resp.Revision = opts.Revision
	}
	if len(r.Kvs) > 0 {
		resp.KVs = make([]kv.KeyValue, len(r.Kvs))
		for i, e := range r.Kvs {
			resp.KVs[i] = *s.strip(e)
		}
	}
	return resp, nil
}

// Create implements kv.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte) (kv.WriteResponse, error) {
	return s.txn(ctx, key, value, clientv3.Compare(clientv3.CreateRevision(s.key(key)), "=", 0), false)
}

// Update implements kv.Store.
func (s *Store) Update(ctx context.Context, key string, value []byte, modRevision int64) (kv.WriteResponse, error) {
	return s.txn(ctx, key, value, s.modIs(key, modRevision), false)
}

// Delete implements kv.Store.
func (s *Store) Delete(ctx context.Context, key string, modRevision int64) (kv.WriteResponse, error) {
	return s.txn(ctx, key, nil, s.modIs(key, modRevision), true)
}

// modIs compares a key's mod revision. An absent key has mod revision 0 in
// etcd's compares, so 0 would match it: the contract says a write to an
// absent key loses, so a revision of 0 or less compares with an
// impossible value instead.
func (s *Store) modIs(key string, rev int64) clientv3.Cmp {
	if rev <= 0 {
		rev = -1
	}
	return clientv3.Compare(clientv3.ModRevision(s.key(key)), "=", rev)
}

func (s *Store) txn(ctx context.Context, key string, value []byte, cmp clientv3.Cmp, del bool) (kv.WriteResponse, error) {
	if err := kv.CheckWrite(key, value, s.maxVal); err != nil {
		return kv.WriteResponse{}, err
	}
	if err := s.checkOpen(); err != nil {
		return kv.WriteResponse{}, err
	}
	k := s.key(key)
	then := clientv3.OpPut(k, string(value), clientv3.WithPrevKV())
	if del {
		then = clientv3.OpDelete(k, clientv3.WithPrevKV())
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	r, err := s.c.Txn(ctx).If(cmp).Then(then).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return kv.WriteResponse{}, mapErr(err)
	}
	resp := kv.WriteResponse{Succeeded: r.Succeeded, Revision: r.Header.Revision}
	if !r.Succeeded {
		if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			resp.Prev = s.strip(kvs[0])
		}
		return resp, nil
	}
	if del {
		resp.Prev = s.strip(r.Responses[0].GetResponseDeleteRange().PrevKvs[0])
		return resp, nil
	}
	resp.Prev = s.strip(r.Responses[0].GetResponsePut().PrevKv)
	resp.KV = &kv.KeyValue{Key: key, Value: value, CreateRevision: resp.Revision, ModRevision: resp.Revision, Version: 1}
	if resp.Prev != nil {
		resp.KV.CreateRevision, resp.KV.Version = resp.Prev.CreateRevision, resp.Prev.Version+1
	}
	return resp, nil
}

// Compact implements kv.Store. It compacts the whole cluster.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	_, err := s.c.Compact(ctx, rev)
	return mapErr(err)
}

// compactRevKey is the key through which the API servers sharing an etcd
// cluster take turns compacting it: kube-apiserver's, outside any prefix,
// because a compaction is the whole cluster's. kplane and kube-apiserver
// servers on one cluster so share the turns too.
const compactRevKey = "compact_rev_key"

// CompactTurn is what CompactInTurn did; pass its Turn and Revision to the
// next call.
type CompactTurn struct {
	// Turn is the number of turns taken so far by every server (the
	// version of compact_rev_key).
	Turn int64
	// Revision is the cluster's revision when the turn was tried: the
	// revision to compact to at the next one.
	Revision int64
	// Compacted is the revision this call compacted the cluster to: 0 when
	// another server had taken a turn since this one's last call, or on a
	// first call.
	Compacted int64
	// Latest is the revision the last turn recorded (another server's when
	// Compacted is 0), 0 if unknown.
	Latest int64
}

// CompactInTurn compacts the cluster to rev if no server has taken a turn
// since turn, as kube-apiserver's compactor does. The turn is one etcd
// transaction on compact_rev_key: if its version is still turn, it is
// rewritten with rev (taking the turn) and the cluster compacted to rev;
// otherwise the key is read, and the caller learns the turn to pass next
// time. So however many servers run, the cluster is compacted about once
// per interval, and when the one that has been compacting stops another
// takes over within two intervals. A rev of 0 (the first call) takes the
// turn without compacting. A compaction already at or past rev is not an
// error.
func (s *Store) CompactInTurn(ctx context.Context, turn, rev int64) (CompactTurn, error) {
	if err := s.checkOpen(); err != nil {
		return CompactTurn{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.c.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(compactRevKey), "=", turn),
	).Then(
		clientv3.OpPut(compactRevKey, strconv.FormatInt(rev, 10)),
	).Else(
		clientv3.OpGet(compactRevKey),
	).Commit()
	if err != nil {
		return CompactTurn{Turn: turn, Revision: rev}, mapErr(err)
	}
	t := CompactTurn{Revision: resp.Header.Revision}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 { // deleted by hand: start the count again
			return t, nil
		}
		t.Turn = kvs[0].Version
		// A value that is not a revision is left to whoever wrote it.
		t.Latest, _ = strconv.ParseInt(string(kvs[0].Value), 10, 64)
		return t, nil
	}
	t.Turn, t.Latest = turn+1, rev
	if rev == 0 {
		return t, nil
	}
	if _, err := s.c.Compact(ctx, rev); err != nil {
		err = mapErr(err)
		if errors.Is(err, kv.ErrCompacted) {
			return t, nil
		}
		return t, err
	}
	t.Compacted = rev
	return t, nil
}

// DiskBytes reports the size etcd's database file takes on disk (its
// Status's DbSize, the figure kube-apiserver serves as
// apiserver_storage_size_bytes), from the first endpoint that answers.
// It is the whole cluster's database, not only the keys under the prefix.
func (s *Store) DiskBytes(ctx context.Context) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var errs []error
	for _, ep := range s.c.Endpoints() {
		r, err := s.c.Status(ctx, ep)
		if err == nil {
			return r.DbSize, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	return 0, mapErr(errors.Join(errs...))
}

// Close implements kv.Store: open watches end with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	if s.ownsC {
		return s.c.Close()
	}
	return nil
}
