// Package quota enforces ResourceQuotas, as kube-apiserver's ResourceQuota
// admission plugin and kube-controller-manager's resourcequota controller
// do between them, for the quotas a control plane without pods has: object
// counts.
//
// A quota's spec.hard names resources: count/<resource> for the core
// group, count/<resource>.<group> for the others (custom resources too),
// and the legacy names configmaps, secrets and resourcequotas. The other
// names (cpu, pods, services...) are accepted, as upstream's generic
// control plane accepts them, and never counted: kplane serves nothing
// that uses them.
//
// Admission (Quota.Charge, registry.Quota) is asked about every create of
// a namespaced kind, last, just before it is stored. It counts the object
// in each quota of its namespace whose status.hard names it, and refuses
// it (403, upstream's "exceeded quota" message) when a count would pass its
// limit. The counts are written to the quotas' status.used before the
// object is stored, with the quota's resourceVersion as a precondition, so
// that replicas over one etcd never admit past a limit together. Creates
// that wait for one namespace are charged together, one write per quota
// for all of them, as upstream batches them. A create that fails after it
// was charged leaves the count high until the controller counts again,
// which it is asked to do at once.
//
// The controller (Quota.Run) fills in a new or changed quota's status:
// status.hard from spec.hard, status.used from a count of the objects in
// the namespace. It counts again when an object a quota counts is deleted,
// and every Resync (5 minutes, as upstream's --resource-quota-sync-period).
// Within one kplane, it never counts while a create it was charged for is
// still being stored, so it does not undo a charge. Events and the reviews
// are never counted, as upstream.
package quota
