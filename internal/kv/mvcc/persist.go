package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc/wal"
)

// On-disk formats. The wal package frames and checksums every record; these
// are the payloads.
//
// Log records, one per write or compaction:
//
//	put:     0x01 | revision (8 bytes, big endian) | uvarint key length | key | value
//	delete:  0x02 | revision (8 bytes) | uvarint key length | key
//	compact: 0x03 | revision (8 bytes)
//
// A put carries no create revision or version: replay derives them exactly
// as the original write did, from the key's state before it.
//
// Snapshot metadata: 0x01 (format) | last revision (8) | compaction point (8).
// Snapshot records, one per retained version, in key order then revision
// order: uvarint key length | key | varint create | varint mod | varint
// version | value. Version 0 marks a tombstone.
const (
	recPut     = 0x01
	recDelete  = 0x02
	recCompact = 0x03

	snapFormat = 0x01
)

var errCorrupt = errors.New("mvcc: corrupt state on disk")

func encodeWrite(key string, value []byte, del bool) []byte {
	b := make([]byte, 9, 9+binary.MaxVarintLen64+len(key)+len(value))
	b[0] = recPut
	if del {
		b[0] = recDelete
	}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// setRevision fills in the revision of a record from encodeWrite.
func setRevision(rec []byte, rev int64) { binary.BigEndian.PutUint64(rec[1:9], uint64(rev)) }

func encodeCompact(rev int64) []byte {
	b := make([]byte, 9)
	b[0] = recCompact
	binary.BigEndian.PutUint64(b[1:], uint64(rev))
	return b
}

func encodeSnapshotMeta(rev, compactRev int64) []byte {
	b := make([]byte, 17)
	b[0] = snapFormat
	binary.BigEndian.PutUint64(b[1:], uint64(rev))
	binary.BigEndian.PutUint64(b[9:], uint64(compactRev))
	return b
}

func encodeSnapshotEntry(e *kv.KeyValue) []byte {
	b := make([]byte, 0, 4*binary.MaxVarintLen64+len(e.Key)+len(e.Value))
	b = binary.AppendUvarint(b, uint64(len(e.Key)))
	b = append(b, e.Key...)
	b = binary.AppendVarint(b, e.CreateRevision)
	b = binary.AppendVarint(b, e.ModRevision)
	b = binary.AppendVarint(b, e.Version)
	return append(b, e.Value...)
}

// readKey splits a uvarint-length-prefixed key off b. The key is b's
// bytes: a copy is the caller's to make, if it keeps it.
func readKey(b []byte) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, fmt.Errorf("%w: bad key length", errCorrupt)
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}

// view is b as a string that is not kept: for index lookups and
// comparisons of a record's key, which the log reader may reuse.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func readVarints(b []byte, out ...*int64) ([]byte, error) {
	for _, p := range out {
		v, w := binary.Varint(b)
		if w <= 0 {
			return nil, fmt.Errorf("%w: bad number", errCorrupt)
		}
		*p, b = v, b[w:]
	}
	return b, nil
}

// recover rebuilds the state from the newest snapshot and the log after it.
// Open calls it before any other goroutine exists, so it takes no locks.
func (s *Store) recover() error {
	start := time.Now()
	l, err := wal.Open(wal.Options{Dir: s.cfg.Dir, Logger: s.log})
	if err != nil {
		return fmt.Errorf("mvcc: opening log: %w", err)
	}
	var cur *keyIndex
	meta, found, err := l.LoadSnapshot(func(rec []byte) error {
		key, rest, err := readKey(rec)
		if err != nil {
			return err
		}
		var e kv.KeyValue
		value, err := readVarints(rest, &e.CreateRevision, &e.ModRevision, &e.Version)
		if err != nil {
			return err
		}
		if cur == nil || cur.key != view(key) {
			if cur != nil && view(key) < cur.key {
				return fmt.Errorf("%w: snapshot keys out of order", errCorrupt)
			}
			cur = &keyIndex{key: s.recovery.string(key)}
			s.mu.index.ReplaceOrInsert(cur)
		}
		e.Key = cur.key
		if e.Version != 0 {
			e.Value = s.recovery.bytes(value)
		}
		cur.entries = append(cur.entries, e)
		return nil
	})
	if err != nil {
		l.Close()
		return fmt.Errorf("mvcc: loading snapshot in %s: %w", s.cfg.Dir, err)
	}
	if found {
		if err := s.restoreMeta(meta.Data); err != nil {
			l.Close()
			return err
		}
	}
	stats, err := l.Replay(meta.Segment, s.replay)
	if err != nil {
		l.Close()
		return fmt.Errorf("mvcc: replaying log in %s: %w", s.cfg.Dir, err)
	}
	s.wal = l
	s.recovery = slab{} // what it copied stays with the keys and values
	s.log.Info("store recovered",
		"dir", s.cfg.Dir, "revision", s.mu.lastRev, "compacted", s.mu.compactRev,
		"keys", s.mu.index.Len(), "snapshot", found, "replayed", fmt.Sprintf("%+v", stats),
		"took", time.Since(start))
	return nil
}

// restoreMeta sets the revisions from a snapshot's metadata and rebuilds the
// history from the index: every revision from the history base up is
// exactly one retained entry.
func (s *Store) restoreMeta(data []byte) error {
	if len(data) != 17 || data[0] != snapFormat {
		return fmt.Errorf("%w: unknown snapshot format", errCorrupt)
	}
	s.mu.lastRev = int64(binary.BigEndian.Uint64(data[1:]))
	s.mu.compactRev = int64(binary.BigEndian.Uint64(data[9:]))
	s.mu.histBase = max(s.mu.compactRev, 2)
	n := s.mu.lastRev - s.mu.histBase + 1
	if n < 0 {
		n = 0
	}
	s.mu.history = make([]*keyIndex, n)
	var bad error
	s.mu.index.Ascend(func(ki *keyIndex) bool {
		for i, e := range ki.entries {
			if i < len(ki.entries)-1 {
				s.mu.oldBytes += int64(len(e.Value))
			}
			if e.ModRevision < s.mu.histBase {
				continue
			}
			if e.ModRevision > s.mu.lastRev || s.mu.history[e.ModRevision-s.mu.histBase] != nil {
				bad = fmt.Errorf("%w: snapshot revision %d out of place", errCorrupt, e.ModRevision)
				return false
			}
			s.mu.history[e.ModRevision-s.mu.histBase] = ki
		}
		return true
	})
	if bad != nil {
		return bad
	}
	for i, ki := range s.mu.history {
		if ki == nil {
			return fmt.Errorf("%w: snapshot has no write at revision %d", errCorrupt, s.mu.histBase+int64(i))
		}
	}
	return nil
}

// replay applies one log record during recovery. Records at or below the
// snapshot's revision are already in it and are skipped.
func (s *Store) replay(rec []byte) error {
	if len(rec) < 9 {
		return fmt.Errorf("%w: short record", errCorrupt)
	}
	rev := int64(binary.BigEndian.Uint64(rec[1:9]))
	switch rec[0] {
	case recCompact:
		if rev > s.mu.compactRev {
			if rev > s.mu.lastRev {
				return fmt.Errorf("%w: compaction to %d beyond revision %d", errCorrupt, rev, s.mu.lastRev)
			}
			s.trimIndex(rev, s.setCompactLocked(rev))
		}
		return nil
	case recPut, recDelete:
	default:
		return fmt.Errorf("%w: unknown record type %#x", errCorrupt, rec[0])
	}
	if rev <= s.mu.lastRev {
		return nil
	}
	if rev != s.mu.lastRev+1 {
		return fmt.Errorf("%w: record at revision %d follows revision %d", errCorrupt, rev, s.mu.lastRev)
	}
	key, value, err := readKey(rec[9:])
	if err != nil {
		return err
	}
	ki, _ := s.mu.index.Get(&keyIndex{key: view(key)})
	var cur *kv.KeyValue
	if ki != nil {
		cur = ki.live()
	}
	del := rec[0] == recDelete
	if del && cur == nil {
		return fmt.Errorf("%w: delete of absent key %q at revision %d", errCorrupt, key, rev)
	}
	if ki == nil {
		ki = &keyIndex{key: s.recovery.string(key)}
		s.mu.index.ReplaceOrInsert(ki)
	}
	// The record's buffer may be reused by the log reader: copy the value.
	var v []byte
	if !del {
		v = s.recovery.bytes(value)
	}
	s.applyLocked(ki, newVersion(ki.key, cur, rev, v, del))
	return nil
}
