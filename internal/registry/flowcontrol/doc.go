// Package flowcontrol is API Priority and Fairness, as kube-apiserver runs
// it: every request is classified by the first FlowSchema that takes it
// (lowest matchingPrecedence first, then by name) into the
// PriorityLevelConfiguration the schema names, and waits there for a seat.
//
// The server's seats (--max-requests-inflight plus
// --max-mutating-requests-inflight, 600 by default) are shared among the
// limited levels by their nominalConcurrencyShares. Every 10 seconds each
// level's seats are set again from what it was asked for: an idle level
// lends up to its lendablePercent, a busy one borrows up to its
// borrowingLimitPercent (borrow.go). An exempt level (system:masters, the
// health probes) is never limited.
//
// A limited level with the Reject response refuses a request when its
// seats are full. One with the Queue response puts it in a queue: the
// least loaded of a hand of queues dealt by the hash of the request's flow
// (the schema and, by its distinguisherMethod, the user or the namespace),
// so that one heavy flow fills few queues. Freed seats go to the queue
// whose next request starts earliest in virtual time (fair queuing: each
// active queue is owed an equal share of the seats, and a request's real
// running time is charged to its queue). A request waits at most a
// quarter of its timeout (15 s by default); a full queue or a wait that
// runs out is refused with 429 and a Retry-After that grows while
// refusals go on (level.go).
//
// Controller.Run keeps the configuration objects: it makes the mandatory
// and suggested objects kube-apiserver makes (bootstrap.go) at start and
// every minute, puts back their spec unless a suggested one's annotation
// apf.kubernetes.io/autoupdate-spec says "false", follows the stored
// objects into the classifier, and writes each FlowSchema's Dangling
// condition (run.go).
//
// A request takes one seat, a list the seats of its estimated work (the
// caller's estimate, capped by the level), and a write that many open
// watches will be told of a seat per 10 of them, held a moment after it
// ends (watches.go); a watch holds its seats only until it is set up, as
// upstream.
package flowcontrol
