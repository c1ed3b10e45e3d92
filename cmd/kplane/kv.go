package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/kplane-dev/kplane/internal/app"
	"github.com/kplane-dev/kplane/internal/kv"
)

const kvUsage = `Usage: kplane kv [flags] <command> [args]

Commands (answers are JSON lines, in etcdctl's -w json shape):
  get KEY [--prefix] [--rev N] [--limit N] [--count-only]
  put KEY VALUE                 create KEY, or update it whatever its revision
  del KEY                       delete KEY
  watch KEY [--prefix] [--rev N] [--count N]
  compact REV
  demo                          run seed 002's sequence: put k1, put k2, put k1,
                                del k1, get k1 at an old revision, put k1

Flags:
`

func runKV(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, kvUsage); fs.PrintDefaults() }
	cfg := app.StoreConfig{}
	var endpoints string
	fs.StringVar(&cfg.DataDir, "data-dir", "./kplane-data", "directory holding kplane's state")
	fs.StringVar(&cfg.Storage, "storage", app.StorageEmbedded, "storage engine: embedded, memory or etcd")
	fs.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated etcd endpoints, for --storage etcd")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/registry", "key prefix in etcd, for --storage etcd")
	verbose := fs.Bool("v", false, "log the store's messages to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if endpoints != "" {
		cfg.EtcdEndpoints = strings.Split(endpoints, ",")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cmd, rest := fs.Arg(0), fs.Args()[1:]
	c, ok := kvCommands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "kplane kv: unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
	store, err := app.OpenStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kplane kv: %v\n", err)
		return 1
	}
	defer store.Close()
	out := json.NewEncoder(stdout)
	if err := c(ctx, store, rest, out); err != nil {
		fmt.Fprintf(stderr, "kplane kv %s: %v\n", cmd, err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

var kvCommands = map[string]func(context.Context, kv.Store, []string, *json.Encoder) error{
	"get":     kvGet,
	"put":     kvPut,
	"del":     kvDel,
	"watch":   kvWatch,
	"compact": kvCompact,
	"demo":    kvDemo,
}

// The JSON shapes follow etcdctl -w json, with values as text.
type jsonKV struct {
	Key            string `json:"key"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	Value          string `json:"value,omitempty"`
}

type jsonHeader struct {
	Revision int64 `json:"revision"`
}

func toJSON(e *kv.KeyValue) *jsonKV {
	if e == nil {
		return nil
	}
	return &jsonKV{Key: e.Key, CreateRevision: e.CreateRevision, ModRevision: e.ModRevision, Version: e.Version, Value: string(e.Value)}
}

// rangeFlags parses KEY [--prefix] [--rev N] and the extra flags of one command.
func rangeFlags(name string, args []string, extra func(*flag.FlagSet)) (key string, end string, rev int64, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	prefix := fs.Bool("prefix", false, "")
	fs.Int64Var(&rev, "rev", 0, "")
	if extra != nil {
		extra(fs)
	}
	// Accept flags after the key, as etcdctl does.
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return "", "", 0, usageError{fmt.Sprintf("%s: %v", name, err)}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		return "", "", 0, usageError{fmt.Sprintf("%s takes exactly one KEY", name)}
	}
	key = positional[0]
	if *prefix {
		end = kv.PrefixEnd(key)
	}
	return key, end, rev, nil
}

func kvGet(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	var limit int64
	var countOnly bool
	key, end, rev, err := rangeFlags("get", args, func(fs *flag.FlagSet) {
		fs.Int64Var(&limit, "limit", 0, "")
		fs.BoolVar(&countOnly, "count-only", false, "")
	})
	if err != nil {
		return err
	}
	r, err := s.Range(ctx, key, kv.RangeOptions{End: end, Revision: rev, Limit: limit, CountOnly: countOnly})
	if err != nil {
		return err
	}
	kvs := make([]*jsonKV, len(r.KVs))
	for i := range r.KVs {
		kvs[i] = toJSON(&r.KVs[i])
	}
	return out.Encode(struct {
		Header jsonHeader `json:"header"`
		KVs    []*jsonKV  `json:"kvs,omitempty"`
		More   bool       `json:"more,omitempty"`
		Count  int64      `json:"count"`
	}{jsonHeader{r.Revision}, kvs, r.More, r.Count})
}

// put writes whatever the key's current state is, retrying lost compares:
// the unconditional put of etcdctl, built from conditional writes.
func put(ctx context.Context, s kv.Store, key, value string) (kv.WriteResponse, error) {
	for {
		cur, err := s.Range(ctx, key, kv.RangeOptions{})
		if err != nil {
			return kv.WriteResponse{}, err
		}
		var r kv.WriteResponse
		if len(cur.KVs) == 0 {
			r, err = s.Create(ctx, key, []byte(value))
		} else {
			r, err = s.Update(ctx, key, []byte(value), cur.KVs[0].ModRevision)
		}
		if err != nil || r.Succeeded {
			return r, err
		}
	}
}

func del(ctx context.Context, s kv.Store, key string) (kv.WriteResponse, error) {
	for {
		cur, err := s.Range(ctx, key, kv.RangeOptions{})
		if err != nil || len(cur.KVs) == 0 {
			return kv.WriteResponse{Revision: cur.Revision}, err
		}
		r, err := s.Delete(ctx, key, cur.KVs[0].ModRevision)
		if err != nil || r.Succeeded {
			return r, err
		}
	}
}

func writeAnswer(out *json.Encoder, r kv.WriteResponse) error {
	return out.Encode(struct {
		Header jsonHeader `json:"header"`
		KV     *jsonKV    `json:"kv,omitempty"`
		Prev   *jsonKV    `json:"prev_kv,omitempty"`
	}{jsonHeader{r.Revision}, toJSON(r.KV), toJSON(r.Prev)})
}

func kvPut(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	if len(args) != 2 {
		return usageError{"put takes KEY VALUE"}
	}
	r, err := put(ctx, s, args[0], args[1])
	if err != nil {
		return err
	}
	return writeAnswer(out, r)
}

func kvDel(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	if len(args) != 1 {
		return usageError{"del takes KEY"}
	}
	r, err := del(ctx, s, args[0])
	if err != nil {
		return err
	}
	return writeAnswer(out, r)
}

func kvCompact(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	if len(args) != 1 {
		return usageError{"compact takes REV"}
	}
	rev, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return usageError{fmt.Sprintf("compact: bad revision %q", args[0])}
	}
	if err := s.Compact(ctx, rev); err != nil {
		return err
	}
	return out.Encode(struct {
		Compacted int64 `json:"compacted"`
	}{rev})
}

func kvWatch(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	var count int
	key, end, rev, err := rangeFlags("watch", args, func(fs *flag.FlagSet) {
		fs.IntVar(&count, "count", 0, "")
	})
	if err != nil {
		return err
	}
	w, err := s.Watch(ctx, key, kv.WatchOptions{End: end, Revision: rev})
	if err != nil {
		return err
	}
	defer w.Close()
	seen := 0
	for r := range w.Responses() {
		if r.Err != nil {
			return r.Err
		}
		for _, ev := range r.Events {
			if err := out.Encode(struct {
				Type string  `json:"type"`
				KV   *jsonKV `json:"kv"`
				Prev *jsonKV `json:"prev_kv,omitempty"`
			}{ev.Type.String(), toJSON(&ev.KV), toJSON(ev.PrevKV)}); err != nil {
				return err
			}
			seen++
			if count > 0 && seen >= count {
				return nil
			}
		}
	}
	return ctx.Err()
}

// kvDemo runs the sequence of seed 002 and prints each answer, so the four
// numbers can be compared with etcd's.
func kvDemo(ctx context.Context, s kv.Store, args []string, out *json.Encoder) error {
	if len(args) != 0 {
		return usageError{"demo takes no arguments"}
	}
	step := func(what string) { out.Encode(struct{ Step string }{what}) }
	get := func(key string, rev int64) error {
		return kvGet(ctx, s, []string{key, "--rev", strconv.FormatInt(rev, 10)}, out)
	}
	step("put k1 v1")
	r, err := put(ctx, s, "k1", "v1")
	if err != nil {
		return err
	}
	firstPut := r.Revision
	writeAnswer(out, r)
	step("put k2 v2")
	if r, err = put(ctx, s, "k2", "v2"); err != nil {
		return err
	}
	writeAnswer(out, r)
	step("get k1")
	if err := get("k1", 0); err != nil {
		return err
	}
	step("put k1 nv1")
	if r, err = put(ctx, s, "k1", "nv1"); err != nil {
		return err
	}
	writeAnswer(out, r)
	step("get k1; get k2")
	if err := get("k1", 0); err != nil {
		return err
	}
	if err := get("k2", 0); err != nil {
		return err
	}
	step("del k1")
	if r, err = del(ctx, s, "k1"); err != nil {
		return err
	}
	writeAnswer(out, r)
	step(fmt.Sprintf("get k1 --rev=%d", firstPut))
	if err := get("k1", firstPut); err != nil {
		return err
	}
	step("put k1 dnv1")
	if r, err = put(ctx, s, "k1", "dnv1"); err != nil {
		return err
	}
	return writeAnswer(out, r)
}
