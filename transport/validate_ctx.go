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
	return beside(ctx, "validate input", t.Name, func() error { return ValidateArguments(t, args) })
}

// ValidateOutputContext is ValidateOutput that returns as soon as ctx is
// done (KindCancelled or KindTimeout): the result was received, its check
// did not finish.
func ValidateOutputContext(ctx context.Context, t Tool, structured []byte) error {
	return beside(ctx, "validate output", t.Name, func() error { return ValidateOutput(t, structured) })
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
