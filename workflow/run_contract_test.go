package workflow

import (
	"sync"
	"testing"
)

// TestContractSchemas_CompiledOncePerSchema: equal outputSchemas (equal
// canonical JSON, whatever the key order of the value) share one compiled
// schema, a different one gets its own, and concurrent tasks may check
// outputs at once (run under -race).
func TestContractSchemas_CompiledOncePerSchema(t *testing.T) {
	var cs contractSchemas
	schema := func() map[string]any {
		return map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := map[string]any{"n": i}
			if i%2 == 1 {
				out = map[string]any{"n": "x"}
			}
			err := cs.validateContract(schema(), out)
			if (err != nil) != (i%2 == 1) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("output %v judged wrongly", err)
	}
	first, err := cs.compiled(schema())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.byDigest) != 1 {
		t.Fatalf("%d compiled schemas for one outputSchema", len(cs.byDigest))
	}
	if again, _ := cs.compiled(schema()); again != first {
		t.Fatal("the same outputSchema compiled twice")
	}
	if _, err := cs.compiled(map[string]any{"type": "string"}); err != nil || len(cs.byDigest) != 2 {
		t.Fatalf("a second schema: err %v, %d compiled", err, len(cs.byDigest))
	}
	if _, err := cs.compiled(map[string]any{"type": 7}); err == nil {
		t.Fatal("an invalid outputSchema compiled")
	}
}
