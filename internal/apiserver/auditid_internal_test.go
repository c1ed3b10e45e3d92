package apiserver

import (
	"regexp"
	"testing"
)

// Audit IDs are random version 4 UUIDs, none repeated across refills of
// the buffer.
func TestAuditIDsAreVersion4UUIDs(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	var ids auditIDs
	seen := map[string]bool{}
	for range 1000 { // four refills
		id := ids.new()
		if !form.MatchString(id) || seen[id] {
			t.Fatalf("audit ID %q: not a new version 4 UUID", id)
		}
		seen[id] = true
	}
}
