package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// payloadBytes is the size of the value each bulk ConfigMap holds.
const payloadBytes = 1024

// A payload kind says what the 1 KiB of a bulk ConfigMap holds. It
// matters wherever a server or client compresses: gzip finds repeats up
// to 32 KiB back, so a list of identical values shrinks however random
// each value is.
type payloadKind string

const (
	// payloadLetters is 1 KiB of one letter, the same in every object,
	// as the figures of the first nineteen passes were measured. A list
	// of them gzips about 37×, which flatters any server that compresses.
	payloadLetters payloadKind = "letters"
	// payloadText is 1 KiB of configuration-like text (keys, words,
	// numbers, an occasional digest), different in every object: the
	// default. A list of them gzips about as configuration files do
	// (TestPayloads).
	payloadText payloadKind = "text"
)

var payloadKinds = []payloadKind{payloadLetters, payloadText}

// parsePayload checks a --payload value.
func parsePayload(s string) (payloadKind, error) {
	for _, k := range payloadKinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("--payload %q: want letters or text", s)
}

// letters is payloadLetters' one value.
var letters = strings.Repeat("x", payloadBytes)

// value is the payload of bulk object i, and of the apply scenario's
// object of worker i. The same i always gives the same value, so a run
// can check what an earlier one left.
func (k payloadKind) value(i int) string {
	if k != payloadText {
		return letters
	}
	return configText(uint64(i), payloadBytes)
}

// Words of the text payload: what configuration files are made of.
var (
	textSections = []string{"server", "client", "database", "cache", "auth", "metrics", "logging", "storage", "queue", "tls", "proxy", "scheduler", "feature", "limits", "retry"}
	textKeys     = []string{"host", "port", "timeout", "enabled", "level", "path", "name", "replicas", "max_connections", "interval", "endpoint", "region", "user", "mode", "buffer_size", "ttl", "threshold", "format", "backoff", "pool"}
	textWords    = []string{"true", "false", "info", "debug", "warn", "json", "text", "primary", "secondary", "us-east-1", "eu-west-2", "/var/lib/app", "/etc/app/conf.d", "round-robin", "least-connections", "admin", "service", "https", "tcp", "exponential", "linear"}
)

// configText is n bytes of text like a configuration file's, drawn from a
// generator seeded by seed: sections, keys, and values that are words,
// numbers, durations, addresses or hex digests.
func configText(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x6b706c616e65))
	var b strings.Builder
	b.Grow(n + 128)
	for b.Len() < n {
		if rng.IntN(6) == 0 {
			fmt.Fprintf(&b, "[%s.%s]\n", textSections[rng.IntN(len(textSections))], textKeys[rng.IntN(len(textKeys))])
			continue
		}
		b.WriteString(textKeys[rng.IntN(len(textKeys))])
		b.WriteString(" = ")
		switch rng.IntN(6) {
		case 0, 1:
			b.WriteString(textWords[rng.IntN(len(textWords))])
		case 2:
			b.WriteString(strconv.Itoa(rng.IntN(100000)))
		case 3:
			b.WriteString(strconv.Itoa(1+rng.IntN(300)) + []string{"ms", "s", "m"}[rng.IntN(3)])
		case 4:
			fmt.Fprintf(&b, "10.%d.%d.%d:%d", rng.IntN(256), rng.IntN(256), rng.IntN(256), 1024+rng.IntN(60000))
		case 5:
			fmt.Fprintf(&b, "sha256:%016x%016x", rng.Uint64(), rng.Uint64())
		}
		b.WriteByte('\n')
	}
	return b.String()[:n]
}
