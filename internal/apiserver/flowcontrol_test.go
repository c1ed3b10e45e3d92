package apiserver_test

import (
	"context"
	"net/http/httptest"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
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
