package spec

import "sort"

// Warnings are what check says of a valid workflow that may not do what
// its author expects, at the field concerned: a retry policy on an
// at_most_once or unknown action, which is followed only after failures
// that prove the tool did not run (docs/WORKFLOWS.md, "What a retry
// follows"). A workflow with warnings runs; run does not print them.
func (w *Workflow) Warnings() Diagnostics {
	c := &checker{w: w}
	names := make([]string, 0, len(w.Spec.Actions))
	for name := range w.Spec.Actions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := w.Spec.Actions[name]
		class := a.Class()
		if a.Retry == nil || (class != IdempotencyAtMostOnce && class != IdempotencyUnknown) {
			continue
		}
		why := "at_most_once"
		if class == IdempotencyUnknown {
			why = "unknown (the default)"
		}
		c.errf(joinPath("spec.actions", name)+".retry", "retry on an action whose idempotency is %s covers only failures that prove nothing was sent "+
			"(connection refused, DNS or TLS failure before the request, a session that could not be opened, a 401 or other 4xx before dispatch, "+
			"the tool missing); after isError, a JSON-RPC error or an unusable result the tool may have run, and the call is not retried "+
			"(declare pure, idempotent or keyed if running it again is safe)", why)
	}
	c.diags.sort()
	return c.diags
}
