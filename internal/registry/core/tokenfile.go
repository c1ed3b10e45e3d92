package core

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/kplane-dev/kplane/internal/registry"
)

// TokenFile is kube-apiserver's --token-auth-file: static bearer tokens,
// read once at start from a CSV file of token, user name, uid and
// optionally a quoted, comma-separated list of groups:
//
//	31ada4fd-adec-460c-809a-9e56ceb75269,ci-bot,1001,"ci,deployers"
//
// Each token names its user, with system:authenticated added. A record
// with an empty token is skipped; a token repeated takes its last
// record's user (both with a warning, as upstream's). Like upstream's,
// the tokens hold for the API server's audiences only.
type TokenFile struct {
	users map[string]registry.User
}

// ReadTokenFile reads path, with upstream's errors.
func ReadTokenFile(path string, log *slog.Logger) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	tf := &TokenFile{users: map[string]registry.User{}}
	n := 0
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(record) < 3 {
			return nil, fmt.Errorf("token file '%s' must have at least 3 columns (token, user name, user uid), found %d", path, len(record))
		}
		n++
		if record[0] == "" {
			log.Warn(fmt.Sprintf("empty token has been found in token file '%s', record number '%d'", path, n))
			continue
		}
		if _, ok := tf.users[record[0]]; ok {
			log.Warn(fmt.Sprintf("duplicate token has been found in token file '%s', record number '%d'", path, n))
		}
		u := registry.User{Name: record[1], UID: record[2]}
		if len(record) >= 4 {
			u.Groups = strings.Split(record[3], ",")
		}
		tf.users[record[0]] = u
	}
	return tf, nil
}

// AuthenticateToken is the user of token, if the file has it, for the
// API's audiences among those asked (none of them: not authenticated).
func (tf *TokenFile) AuthenticateToken(_ context.Context, token string, wanted, implicit []string) (registry.User, []string, bool, error) {
	auds := registry.AgnosticAudiences(wanted, implicit)
	u, ok := tf.users[token]
	if len(auds) == 0 || !ok {
		return registry.User{}, nil, false, nil
	}
	return registry.Authenticated(u), auds, true, nil
}
