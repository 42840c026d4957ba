package properties

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkQueueRetries is the cost of finding the retries the work
// queue owes (queueRetries) on a long case's trace (3,000 requests),
// against a whole check of a deadline property whose state is still
// wrong on it, which calls it up to three times: a check of a long
// trace under load is what delays a verdict.
func BenchmarkQueueRetries(b *testing.B) {
	tr := &Trace{Start: t0, Healed: at(30 * s), End: at(60 * s), States: replicaStates(1, 2), Controller: "operator"}
	for i := range 3000 {
		code := 200
		if i%7 == 0 && i < 2000 {
			code = 409
		}
		tr.Requests = append(tr.Requests, Request{At: at(time.Duration(i) * 15 * time.Millisecond), User: "operator", Verb: "update",
			Resource: "pods", Namespace: "ns", Name: fmt.Sprint("web-", i%5), Code: code})
		if i%50 == 0 {
			tr.Requests = append(tr.Requests, Request{At: at(time.Duration(i) * 15 * time.Millisecond), User: "kubeprop", Verb: "patch", Resource: "pods", Namespace: "ns", Name: "web-0", Code: 200})
		}
	}
	p := Converges("app-ready", allReady, ConvergeOptions{Within: 60 * s})
	b.Run("queueRetries", func(b *testing.B) {
		for b.Loop() {
			tr.queueRetries()
		}
	})
	b.Run("converges", func(b *testing.B) {
		for b.Loop() {
			p.Check(tr)
		}
	})
}
