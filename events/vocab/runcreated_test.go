package vocab

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// runCreatedSeeds are run.created payloads as submit writes them, and
// variants the scan must read as encoding/json does or leave to it.
var runCreatedSeeds = []string{
	`{"runId":"run-01a2462d-f4b9-79a8-9c97-d32a3df67f3c","workflow":"one-call","file":"test.yaml","digest":"sha256:0be7","source":"apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: one-call}\nspec:\n  mcpServers:\n    local: {url: \"http://127.0.0.1:46463/mcp\", timeoutSeconds: 30}\n","inputs":{},"mode":"run","servers":{"local":"http://127.0.0.1:46463/mcp"},"command":"submit","queued":true}`,
	`{"runId":"r","workflow":"w","file":"f","digest":"d","source":"s","inputs":{"n":1,"x":[1.5,"a\u00e9",null,{"y":true}]},"mode":"run","sourceRunId":"s0","traceParent":"00-ab-cd-01","traceState":"k=v","queued":false}`,
	` { "runId" : "r" , "inputs" : null , "queued" : true } `,
	`{"runId":"r","runId":"s"}`,
	`{"RunID":"r"}`,
	`{"runId":null,"mode":"run"}`,
	`{"runId":"r","extra":1}`,
	`{"runId":"a\ud800b","servers":{"a":"b","a":"c"}}`,
	`{"queued":1}`,
	`{"inputs":[1]}`,
	`{"servers":{"a":1}}`,
	`{}`,
	`{"runId":"r",}`,
	`{"source":"\u0000\t\\\"\/"}`,
	`{"source":"a\nb\"c\\d\/e\bf\fg\rh\ti","queued":truex}`,
	`{"servers": { "a" : "b" , "c":"d\n"}, "queued" : false , "inputs" : { } }`,
	`{"servers":{},"inputs":{}x}`,
	`{"servers":{"a":"b",}}`,
}

// FuzzScanRunCreated holds the run.created scan to encoding/json: whenever
// it takes a payload it must produce exactly what json.Unmarshal does.
func FuzzScanRunCreated(f *testing.F) {
	for _, s := range runCreatedSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, ok := scanRunCreated(p)
		if !ok {
			return
		}
		var want RunCreated
		if err := json.Unmarshal([]byte(p), &want); err != nil {
			t.Fatalf("scanRunCreated took %q, encoding/json refuses it: %v", p, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scanRunCreated(%q)\n got %+v\nwant %+v", p, got, want)
		}
	})
}

// TestDecodeRunCreated: a run.created as the log holds it (submit's, its
// workflow source full of escapes; one with inputs and every optional
// member) is read by the scan, not by encoding/json, and DecodeRunCreated
// returns what Decode does, for those and for payloads the scan leaves to
// encoding/json, errors included.
func TestDecodeRunCreated(t *testing.T) {
	written, err := json.Marshal(RunCreated{RunID: "r", Workflow: "w", File: "f.yaml", Digest: "sha256:00", Source: "a: \"b\"\n\tc: <d> & é\n",
		Inputs: map[string]any{"n": 1, "s": "x", "l": []any{true, nil}}, Mode: "run", SourceRunID: "s", Servers: map[string]string{"a": "http://x/mcp"},
		Command: "submit", Queued: true, TraceParent: "00-1-2-01", TraceState: "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{runCreatedSeeds[0], runCreatedSeeds[1], string(written)} {
		if _, ok := scanRunCreated(p); !ok {
			t.Errorf("scanRunCreated(%q) fell back to encoding/json", p)
		}
	}
	for _, p := range append(runCreatedSeeds, string(written), `{"runId":`, `[]`, `{"queued":"yes"}`) {
		e := events.Event{RunID: "r", Seq: 1, Type: TypeRunCreated, Payload: p}
		got, gotErr := DecodeRunCreated(e)
		want, wantErr := Decode[RunCreated](e)
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeRunCreated(%q) = %+v, %v; Decode = %+v, %v", p, got, gotErr, want, wantErr)
		}
	}
}

// BenchmarkDecodeRunCreated: submit's run.created as a worker's claim
// reads it, by the scan and by encoding/json.
func BenchmarkDecodeRunCreated(b *testing.B) {
	e := events.Event{RunID: "r", Seq: 1, Type: TypeRunCreated, Payload: runCreatedSeeds[0]}
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeRunCreated(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Decode[RunCreated](e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
