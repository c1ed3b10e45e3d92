package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// A snapshot file is snapMagic followed by framed records: first the meta
// (segment number, uint64 little endian, then the engine's data), then the
// engine's records each prefixed with kindRecord, then a trailer of
// kindTrailer and the record count. A file without the trailer is not a
// snapshot.
const (
	kindRecord  = 1
	kindTrailer = 2
)

// WriteSnapshot writes a snapshot atomically, then removes the segments
// below meta.Segment and the older snapshots. records emits the engine's
// records; it may run for long, concurrently with Append and Sync.
func (l *Log) WriteSnapshot(meta SnapshotMeta, records func(emit func(rec []byte) error) error) error {
	final := filepath.Join(l.dir, snapName(meta.Segment))
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var scratch []byte
	size := int64(len(snapMagic))
	write := func(payload []byte) error {
		scratch = frame(scratch[:0], payload)
		size += int64(len(scratch))
		_, err := w.Write(scratch)
		return err
	}
	if _, err := w.WriteString(snapMagic); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	head := binary.LittleEndian.AppendUint64(nil, meta.Segment)
	if err := write(append(head, meta.Data...)); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	var count uint64
	var rec []byte
	err = records(func(r []byte) error {
		count++
		rec = append(append(rec[:0], kindRecord), r...)
		return write(rec)
	})
	if err != nil {
		return fmt.Errorf("wal: snapshot: %w", err)
	}
	if err := write(binary.LittleEndian.AppendUint64([]byte{kindTrailer}, count)); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	ok = true
	l.mu.Lock()
	l.mu.snapSize = size
	l.mu.Unlock()
	if err := syncDir(l.dir); err != nil {
		return err
	}
	return l.removeBefore(meta.Segment)
}

// removeBefore deletes the segments below seq and the snapshots older than
// the one for seq: they are covered by that snapshot.
func (l *Log) removeBefore(seq uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs, err := l.list("wal-", ".log")
	if err != nil {
		return err
	}
	for _, s := range segs {
		if s < seq && s != l.mu.seq {
			if err := os.Remove(filepath.Join(l.dir, segName(s))); err != nil {
				return fmt.Errorf("wal: %w", err)
			}
		}
	}
	snaps, err := l.list("snap-", ".snap")
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if s < seq {
			if err := os.Remove(filepath.Join(l.dir, snapName(s))); err != nil {
				return fmt.Errorf("wal: %w", err)
			}
		}
	}
	return syncDir(l.dir)
}

// LoadSnapshot reads the newest snapshot, calling fn with each record. It
// reports found=false when there is none. A damaged snapshot is an error
// naming the file: snapshots are written atomically, so damage means the
// disk lost data.
func (l *Log) LoadSnapshot(fn func(rec []byte) error) (SnapshotMeta, bool, error) {
	snaps, err := l.list("snap-", ".snap")
	if err != nil || len(snaps) == 0 {
		return SnapshotMeta{}, false, err
	}
	path := filepath.Join(l.dir, snapName(snaps[len(snaps)-1]))
	meta, err := readSnapshot(path, fn)
	if err != nil {
		return SnapshotMeta{}, false, fmt.Errorf("wal: snapshot %s: %w", path, err)
	}
	// readSnapshot read the file to its end: its size is the snapshot's.
	fi, err := os.Stat(path)
	if err != nil {
		return SnapshotMeta{}, false, fmt.Errorf("wal: %w", err)
	}
	l.mu.Lock()
	l.mu.snapSize = fi.Size()
	l.mu.Unlock()
	return meta, true, nil
}

func readSnapshot(path string, fn func(rec []byte) error) (SnapshotMeta, error) {
	var meta SnapshotMeta
	f, err := os.Open(path)
	if err != nil {
		return meta, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapMagic {
		return meta, fmt.Errorf("%w: bad snapshot header", ErrCorrupt)
	}
	var buf []byte
	next := func() ([]byte, error) {
		var h [headerLen]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, fmt.Errorf("%w: snapshot ends without its trailer", ErrCorrupt)
		}
		size := binary.LittleEndian.Uint32(h[0:4])
		if size > maxRecord {
			return nil, fmt.Errorf("%w: record length %d", ErrCorrupt, size)
		}
		buf = append(buf[:0], h[:]...)
		buf = append(buf, make([]byte, size)...)
		if _, err := io.ReadFull(r, buf[headerLen:]); err != nil {
			return nil, fmt.Errorf("%w: snapshot record cut short", ErrCorrupt)
		}
		payload, _, err := unframe(buf)
		return payload, err
	}
	head, err := next()
	if err != nil {
		return meta, err
	}
	if len(head) < 8 {
		return meta, fmt.Errorf("%w: snapshot meta too short", ErrCorrupt)
	}
	meta.Segment = binary.LittleEndian.Uint64(head)
	meta.Data = append([]byte(nil), head[8:]...)
	var count uint64
	for {
		rec, err := next()
		if err != nil {
			return meta, err
		}
		if len(rec) == 0 {
			return meta, fmt.Errorf("%w: empty snapshot record", ErrCorrupt)
		}
		switch rec[0] {
		case kindRecord:
			count++
			if err := fn(rec[1:]); err != nil {
				return meta, err
			}
		case kindTrailer:
			if len(rec) != 9 || binary.LittleEndian.Uint64(rec[1:]) != count {
				return meta, fmt.Errorf("%w: trailer does not match the %d records read", ErrCorrupt, count)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				return meta, fmt.Errorf("%w: data after the trailer", ErrCorrupt)
			}
			return meta, nil
		default:
			return meta, errors.Join(ErrCorrupt, fmt.Errorf("unknown snapshot record kind %d", rec[0]))
		}
	}
}
