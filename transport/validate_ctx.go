package transport

import (
	"context"
	"errors"
	"fmt"
)

// The validator (santhosh-tekuri/jsonschema) takes no context: once
// started, a validation runs to its end. The schema budget bounds that end
// (≈ 2 s and ≈ 100 MB at worst, schemabudget.go); these wrappers make a
// deadline or a user's cancel take effect at once anyway, by waiting for
// the validation beside the context. A validation given up on finishes in
// the background, within the budget, and its verdict is dropped.

// ValidateArgumentsContext is ValidateArguments that returns as soon as
// ctx is done: a KindCancelled or KindTimeout error naming the tool, and
// nothing is sent.
func ValidateArgumentsContext(ctx context.Context, t Tool, args []byte) error {
	check := func() error { return ValidateArguments(t, args) }
	if cheap(t.inputSchema(), args) {
		return inline(ctx, "validate input", t.Name, check)
	}
	return beside(ctx, "validate input", t.Name, check)
}

// ValidateOutputContext is ValidateOutput that returns as soon as ctx is
// done (KindCancelled or KindTimeout): the result was received, its check
// did not finish.
func ValidateOutputContext(ctx context.Context, t Tool, structured []byte) error {
	check := func() error { return ValidateOutput(t, structured) }
	if !present(t.outputSchema()) || cheap(t.outputSchema(), structured) {
		return inline(ctx, "validate output", t.Name, check)
	}
	return beside(ctx, "validate output", t.Name, check)
}

// inlineSteps bounds the validations run on the caller's goroutine. At the
// measured worst case of ≈ 6 µs an evaluation (MaxValidationSteps of
// issue 13's recursive oneOf in 0.8 s), 1,024 evaluations end within
// ≈ 6 ms, before a cancel waiting for them would matter; an ordinary
// call's arguments cost a few. Beside the context, a validation costs a
// goroutine, its stack grown for the validator's recursion, and a wake-up
// of another thread on every call's critical path.
const inlineSteps = 1 << 10

// cheap reports whether validating doc against schema is known to take at
// most inlineSteps evaluations: from the static bound of the compiled
// schema's graph (its root-to-node paths times doc's values), the bound
// checkBudget trusts. A schema not compiled yet, or with a cycle, is not
// known to be cheap.
func cheap(schema, doc []byte) bool {
	cs := schemas.cached(schema)
	if cs == nil || cs.graph.paths <= 0 || cs.graph.paths > inlineSteps {
		return false
	}
	if !present(doc) {
		return true // validated as {} (arguments) or refused at once (output)
	}
	return cs.graph.paths*countValues(doc) <= inlineSteps
}

// inline runs validate on the caller's goroutine, unless ctx is done
// already: what beside does for a validation too short to wait beside.
func inline(ctx context.Context, op, tool string, validate func() error) error {
	if err := ctx.Err(); err != nil {
		return stopped(op, tool, err)
	}
	return validate()
}

// beside runs validate and waits for it or for ctx, whichever ends first.
func beside(ctx context.Context, op, tool string, validate func() error) error {
	if ctx.Done() == nil { // never cancelled: no goroutine needed
		return validate()
	}
	if err := ctx.Err(); err != nil {
		return stopped(op, tool, err)
	}
	done := make(chan error, 1) // buffered: an abandoned validation never blocks
	go func() { done <- validate() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return stopped(op, tool, ctx.Err())
	}
}

// stopped is the error of a validation ctx ended.
func stopped(op, tool string, cause error) error {
	kind := KindCancelled
	if errors.Is(cause, context.DeadlineExceeded) {
		kind = KindTimeout
	}
	return &Error{Op: op, Kind: kind, Message: fmt.Sprintf("tool %q: schema validation stopped: %v", tool, cause), Err: cause}
}
