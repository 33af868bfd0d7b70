package transport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateBeside_StopsAtCancelAndDeadline: a validation the context
// ends returns at once with KindCancelled (the user's cancel) or
// KindTimeout (a deadline), naming the tool, while the validation itself
// (held here until the test lets it go) is still running.
func TestValidateBeside_StopsAtCancelAndDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ran := make(chan struct{}, 2)
	held := func() error { ran <- struct{}{}; <-release; return nil }

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- beside(ctx, "validate output", "slow", held) }()
	<-ran // the validation is running
	cancel()
	err := <-errc
	if KindOf(err) != KindCancelled || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: err = %v (kind %s), want KindCancelled", err, KindOf(err))
	}
	if want := `tool "slow": schema validation stopped`; !strings.Contains(err.Error(), want) {
		t.Fatalf("cancel: %q does not name the tool (%q)", err, want)
	}

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if err := beside(dctx, "validate input", "slow", held); KindOf(err) != KindTimeout {
		t.Fatalf("deadline: err = %v (kind %s), want KindTimeout", err, KindOf(err))
	}
	if err := beside(context.Background(), "validate input", "fast", func() error { return nil }); err != nil {
		t.Fatalf("no deadline: err = %v", err)
	}
}

// TestValidateArgumentsContext_CancelledBeforeValidation: a call whose
// context is already done is never validated, and the error says so.
func TestValidateArgumentsContext_CancelledBeforeValidation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tool := Tool{Name: "t", InputSchema: []byte(`{"type":"object"}`)}
	if err := ValidateArgumentsContext(ctx, tool, []byte(`{}`)); KindOf(err) != KindCancelled {
		t.Fatalf("err = %v, want KindCancelled", err)
	}
	if err := ValidateOutputContext(context.Background(), Tool{Name: "t", OutputSchema: []byte(`{"type":"object"}`)}, []byte(`[]`)); KindOf(err) != KindInvalidOutput {
		t.Fatalf("output violation: err = %v, want KindInvalidOutput", err)
	}
}

// TestValidateContext_InlineOnlyWhenBounded: a validation runs on the
// caller's goroutine only when the compiled schema's static bound puts it
// under inlineSteps evaluations; a schema not compiled yet, one with a
// cycle, or a value with many parts is validated beside the context. The
// verdict is the same either way.
func TestValidateContext_InlineOnlyWhenBounded(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"message":{"type":"string"},"rows":{"type":"array","items":{"type":"integer"}}},"required":["message"]}`)
	tool := Tool{Name: "echo", InputSchema: schema}
	small := []byte(`{"message":"m"}`)
	if cheap(schema, small) {
		t.Fatal("a schema never compiled is cheap")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ValidateArgumentsContext(ctx, tool, small); err != nil { // compiles it, beside
		t.Fatalf("valid arguments: %v", err)
	}
	if !cheap(schema, small) {
		t.Fatal("an ordinary schema with a one-member value is not cheap")
	}
	if err := ValidateArgumentsContext(ctx, tool, []byte(`{"message":1}`)); KindOf(err) != KindInvalidArguments {
		t.Fatalf("invalid arguments, inline: err = %v (kind %s), want KindInvalidArguments", err, KindOf(err))
	}
	rows := []byte(`{"message":"m","rows":[` + strings.Repeat("1,", 2000) + `1]}`)
	if cheap(schema, rows) {
		t.Fatal("2,002 values are cheap")
	}
	if err := ValidateArgumentsContext(ctx, tool, rows); err != nil {
		t.Fatalf("valid rows, beside: %v", err)
	}

	cyclic := []byte(`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`)
	if err := ValidateArguments(Tool{Name: "list", InputSchema: cyclic}, []byte(`{"next":{}}`)); err != nil {
		t.Fatalf("cyclic schema: %v", err)
	}
	if cheap(cyclic, []byte(`{"next":{}}`)) {
		t.Fatal("a schema with a cycle is cheap")
	}
}
