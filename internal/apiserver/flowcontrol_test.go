package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// client-go's typed flowcontrol client, which speaks protobuf as
// kube-apiserver serves it to it, writes and reads both kinds: the v1
// defaults come back, and a status written through /status.
func TestFlowControlThroughClientGoProtobuf(t *testing.T) {
	srv := httptest.NewServer(newInProcess(t))
	defer srv.Close()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf"}})
	ctx := context.Background()
	fc := cs.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := pl.Spec.Limited; *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || *l.LimitResponse.Queuing != (flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}) || pl.Generation != 1 {
		t.Fatalf("created %+v", pl)
	}
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "f"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "p"},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "u"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
			}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Fatalf("matching precedence %d", fs.Spec.MatchingPrecedence)
	}
	// The server's controller writes the status too: retried on
	// conflict, as a controller would.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fs, err := fc.FlowSchemas().Get(ctx, "f", metav1.GetOptions{})
		if err != nil {
			return err
		}
		fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse,
			LastTransitionTime: metav1.Now(), Reason: "Found", Message: "found"}}
		_, err = fc.FlowSchemas().UpdateStatus(ctx, fs, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server's bootstrap objects are there too: this one alone. (Its
	// controller may rewrite the condition's message: Found either way.)
	list, err := fc.FlowSchemas().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=f"})
	if err != nil || len(list.Items) != 1 || len(list.Items[0].Status.Conditions) != 1 || list.Items[0].Status.Conditions[0].Reason != "Found" {
		t.Fatalf("list %+v, %v", list, err)
	}
	levels, err := fc.PriorityLevelConfigurations().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=p"})
	if err != nil || len(levels.Items) != 1 || levels.Items[0].Name != "p" {
		t.Fatalf("levels %+v, %v", levels, err)
	}
}

// kube-apiserver's debug dumps of priority and fairness, authorized as
// any non-resource path: the admin's dump of requests shows itself
// executing at the exempt level, with its details; a user without the
// permission is refused; without priority and fairness there are none.
func TestFlowControlDumps(t *testing.T) {
	h := newInProcessAuthorizing(t, true)
	get := func(h http.Handler, path string, groups ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "jo", Organization: groups}}}}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := get(h, "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1", "system:masters")
	lines := strings.Split(strings.TrimSpace(w.Body.String()), "\n")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" || len(lines) < 2 ||
		!strings.HasPrefix(lines[0], "PriorityLevelName, FlowSchemaName, QueueIndex, RequestIndexInQueue, FlowDistingsher, ArriveTime,") {
		t.Fatalf("%d %q\n%s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	own := false
	for _, line := range lines[1:] {
		cells := strings.Split(line, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) == 18 && cells[0] == "exempt" && cells[1] == "exempt" && cells[10] == "jo" && cells[11] == "get" &&
			cells[12] == "/debug/api_priority_and_fairness/dump_requests" {
			own = true
		}
	}
	if !own {
		t.Fatalf("the dump does not show its own request:\n%s", w.Body)
	}
	for _, dump := range []string{"dump_priority_levels", "dump_queues"} {
		w := get(h, "/debug/api_priority_and_fairness/"+dump, "system:masters")
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "global-default,") {
			t.Fatalf("%s: %d\n%s", dump, w.Code, w.Body)
		}
	}
	if w := get(h, "/debug/api_priority_and_fairness/dump_queues", "devs"); w.Code != http.StatusForbidden {
		t.Fatalf("a user without the permission: %d %s", w.Code, w.Body)
	}
	off := newInProcessAuthorizing(t, false, func(c *apiserver.Config) { c.FlowControl = nil })
	if w := get(off, "/debug/api_priority_and_fairness/dump_queues", "system:masters"); w.Code != http.StatusNotFound {
		t.Fatalf("without priority and fairness: %d %s", w.Code, w.Body)
	}
}
