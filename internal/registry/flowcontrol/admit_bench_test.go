package flowcontrol

import (
	"context"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
)

// BenchmarkAdmit is the work priority and fairness adds to a request: the
// classification, a seat taken and given back. The admin's (system:masters:
// the first schema, exempt) and a service account's (its schema ninth of
// eleven, a queuing level of 128 queues).
func BenchmarkAdmit(b *testing.B) {
	c := New(Config{Seats: 600})
	for _, bc := range []struct {
		name string
		user registry.User
	}{
		{"admin", registry.User{Name: "kplane-admin", Groups: []string{"system:masters", "system:authenticated"}}},
		{"serviceaccount", registry.User{Name: "system:serviceaccount:team:ci", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := &registry.Attributes{User: bc.user, Verb: "create", ResourceRequest: true, Resource: "configmaps", Namespace: "team"}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, err := c.Admit(context.Background(), a, "", time.Second, 1)
					if err != nil {
						b.Fatal(err)
					}
					t.Done()
				}
			})
		})
	}
}
