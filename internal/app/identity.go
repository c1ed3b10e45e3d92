package app

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"os"
	"strings"
)

// apiServerID is this server's identity, derived as kube-apiserver
// derives its own (APIServerIdentity): "apiserver-" and a hash of the
// host's name and the server's, the same across restarts on one host.
// The static admission manifest metrics name it (hashed again); "" if
// the host's name cannot be read.
func apiServerID() string {
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, part := range []string{host, "kplane"} {
		var n [2]byte
		binary.BigEndian.PutUint16(n[:], uint16(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	sum := h.Sum(nil)
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}
