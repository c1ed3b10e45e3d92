package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// auditIDs hands out the audit IDs of requests that bring none: random
// (version 4) UUIDs, as upstream's, from the system's randomness read 4
// KiB at a time, so an ID costs its string alone (a UUID package's costs
// four allocations a request). The zero value is ready.
type auditIDs struct {
	mu   sync.Mutex
	buf  [4096]byte
	left int // the unused bytes at the end of buf
}

func (a *auditIDs) new() string {
	var u [16]byte
	a.mu.Lock()
	if a.left < len(u) {
		rand.Read(a.buf[:]) // never fails (crypto/rand since Go 1.24)
		a.left = len(a.buf)
	}
	copy(u[:], a.buf[len(a.buf)-a.left:])
	a.left -= len(u)
	a.mu.Unlock()
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // the RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
