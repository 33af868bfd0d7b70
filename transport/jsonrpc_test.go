package transport

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeFor(t *testing.T) {
	id := json.RawMessage(`7`)
	for _, tc := range []struct {
		in       string
		isResp   bool
		kind     string
		malforme bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, true, "response", false},
		{`{"result":{},"id":7,"jsonrpc":"2.0"}`, true, "response", false},
		// Ids match exactly as sent (issue 13): 7.0, 7e0 and a float that
		// rounds to 7 are not 7.
		{`{"result":{},"id":7.0,"jsonrpc":"2.0"}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7e0,"result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7.0000000000000001,"result":{}}`, false, "", true},
		// A member name repeated at any depth makes the message malformed;
		// names match case-sensitively.
		{`{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[],"isError":false}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","type":"image"}]}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"result":{},"JSONRPC":"1.0"}`, true, "response", false},
		{`{"jsonrpc":"2.0","ID":8,"id":7,"result":{}}`, true, "response", false},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x","MESSAGE":"y"}}`, true, "response", false},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x","message":"y"}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}`, true, "response", false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, false, "notification", false},
		{`{"jsonrpc":"2.0","id":7,"method":"ping"}`, false, "server_request", false},
		{`{"jsonrpc":"2.0","id":8,"result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":"7","result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"id":7,"result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":null,"result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":{},"result":{}}`, false, "", true},
		{`{"jsonrpc":"1.0","id":7,"result":{}}`, false, "", true},
		{`{"id":7,"result":{}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7}`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"result":{}} trailing`, false, "", true},
		{`[{"jsonrpc":"2.0","id":7,"result":{}}]`, false, "", true},
		{`{"jsonrpc":"2.0","id":7,"result":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, false, "", true},
		{``, false, "", true},
	} {
		m, isResp, err := decodeFor([]byte(tc.in), id)
		if tc.malforme {
			if !errors.Is(err, errMalformed) {
				t.Errorf("decodeFor(%.60s) err = %v, want malformed", tc.in, err)
			}
			continue
		}
		if err != nil || isResp != tc.isResp || m.kind() != tc.kind {
			t.Errorf("decodeFor(%.60s) = %v, %v, %v", tc.in, isResp, err, m)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, isResp, err := decodeFor(b, json.RawMessage(`1`))
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("non-malformed error %v", err)
			}
			return
		}
		if !json.Valid(m.Raw) {
			t.Fatalf("accepted invalid JSON")
		}
		if isResp && (m.Method != "" || !sameID(m.ID, json.RawMessage(`1`)) || (m.Result == nil) == (m.Error == nil)) {
			t.Fatalf("accepted a response that is not ours: %s", b)
		}
	})
}

func TestToolDigest(t *testing.T) {
	a := Tool{Name: "x", Description: "one", Title: "T", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","maximum":1.50}}}`)}
	b := Tool{Name: "x", Description: "two", Annotations: json.RawMessage(`{"readOnlyHint":true}`),
		InputSchema: json.RawMessage("{ \"properties\": {\"a\": {\"maximum\":1.50, \"type\":\"number\"}}, \"type\": \"object\" }")}
	if a.Digest() != b.Digest() {
		t.Errorf("key order / description / annotations changed the digest")
	}
	c := a
	c.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","maximum":1.5}}}`)
	if a.Digest() == c.Digest() {
		t.Errorf("numbers must be digested as sent")
	}
	d := a
	d.OutputSchema = json.RawMessage(`{"type":"object"}`)
	e := a
	e.Execution = json.RawMessage(`{"taskSupport":"optional"}`)
	if a.Digest() == d.Digest() || a.Digest() == e.Digest() || d.Digest() == e.Digest() {
		t.Errorf("outputSchema/execution must change the digest")
	}
	html := Tool{Name: "<&>", InputSchema: json.RawMessage(`{"description":"a<b"}`)}
	if !strings.HasPrefix(html.Digest(), "sha256:") || len(html.Digest()) != 71 {
		t.Errorf("digest = %q", html.Digest())
	}
	cat1 := &Catalog{Tools: []Tool{a, d}}
	cat2 := &Catalog{Tools: []Tool{d, b}}
	if cat1.Digest() != cat2.Digest() {
		t.Errorf("catalog digest depends on order")
	}
}

func TestValidate(t *testing.T) {
	tool := Tool{Name: "t",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","minLength":2}},"required":["q"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer"}},"dependencies":{"n":["m"]}}`),
	}
	for _, tc := range []struct {
		args, want string
	}{
		{`{"q":"ok"}`, ""},
		{`{}`, "required"},
		{`{"q":"x"}`, "/q"},
		{`{"q":"ok","z":1}`, "additionalProperties"},
		{`[]`, "type"},
	} {
		err := ValidateArguments(tool, json.RawMessage(tc.args))
		if (err == nil) != (tc.want == "") || (err != nil && (!strings.Contains(err.Error(), tc.want) || KindOf(err) != KindInvalidArguments)) {
			t.Errorf("ValidateArguments(%s) = %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := ValidateOutput(tool, json.RawMessage(`{"n":1,"m":2}`)); err != nil {
		t.Error(err)
	}
	err := ValidateOutput(tool, json.RawMessage(`{"n":1}`)) // draft-07 "dependencies"
	if KindOf(err) != KindInvalidOutput || !strings.Contains(err.Error(), "'m' required") {
		t.Errorf("draft-07 dependencies: %v", err)
	}
	if err := ValidateOutput(tool, nil); KindOf(err) != KindInvalidOutput {
		t.Errorf("missing structuredContent: %v", err)
	}
	if err := ValidateOutput(Tool{Name: "free"}, nil); err != nil {
		t.Errorf("no outputSchema: %v", err)
	}
	// A null for a declared optional property is checked as absent; a null
	// for a required one, or for an undeclared one, is not.
	opt := Tool{Name: "o", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string"},"verbose":{"type":"boolean"}},"required":["region"],"additionalProperties":false}`)}
	for _, tc := range []struct{ args, want string }{
		{`{"region":"eu","verbose":null}`, ""},
		{`{"region":null,"verbose":true}`, "/region"},
		{`{"region":"eu","extra":null}`, "additionalProperties"},
		{`{"region":"eu","verbose":null,"verbose":null}`, "/verbose"}, // not read strictly: checked as given
	} {
		err := ValidateArguments(opt, json.RawMessage(tc.args))
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ValidateArguments(%s) = %v, want %q", tc.args, err, tc.want)
		}
	}
	ref := Tool{Name: "r", InputSchema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}
	if err := ValidateArguments(ref, json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("external $ref: %v", err)
	}
}

func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		e                  Error
		ambiguous, mayHave bool
	}{
		{Error{Kind: KindSessionExpired, Sent: true}, true, true},
		{Error{Kind: KindTimeout, Sent: true}, true, true},
		{Error{Kind: KindTimeout}, false, false},
		{Error{Kind: KindTransportLoss, Sent: true}, true, true},
		{Error{Kind: KindTransportLoss}, false, false},
		{Error{Kind: KindMalformed, Sent: true}, true, true},
		{Error{Kind: KindHTTPStatus, Status: 503, Sent: true}, false, true},
		{Error{Kind: KindHTTPStatus, Status: 400, Sent: true}, false, false},
		{Error{Kind: KindCancelled, Sent: true}, false, true},
		{Error{Kind: KindCancelled}, false, false},
		{Error{Kind: KindRemoteError, Sent: true}, false, false},
		{Error{Kind: KindUnauthorized, Sent: true}, false, false},
		{Error{Kind: KindUnauthorized, Status: 401, Sent: true, Accepted: true}, false, true}, // 401 on the resume GET
		{Error{Kind: KindPolicyDenied}, false, false},
	} {
		if tc.e.Ambiguous() != tc.ambiguous || tc.e.MayHaveExecuted() != tc.mayHave {
			t.Errorf("%+v: ambiguous %v mayHave %v", tc.e, tc.e.Ambiguous(), tc.e.MayHaveExecuted())
		}
	}
	wrapped := errors.Join(errors.New("x"), &Error{Kind: KindTimeout})
	if KindOf(wrapped) != KindTimeout || KindOf(errors.New("plain")) != "" {
		t.Errorf("KindOf")
	}
}

// TestSameID: a number id matches only its token as sent; a string id by
// its decoded value, whatever escapes the server chose.
func TestSameID(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`3`, `3`, true}, {` 3 `, `3`, true}, {`3.0`, `3`, false}, {`3.0000000000000001`, `3`, false}, {`3e0`, `3`, false},
		{`-0`, `0`, false}, {`"3"`, `3`, false}, {`"a\u0062"`, `"ab"`, true}, {`"\u003c"`, `"<"`, true}, {`"ab"`, `"aB"`, false}, {``, `3`, false},
	} {
		if got := sameID(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.same {
			t.Errorf("sameID(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestErrorObjectStrict: the error object's members match exactly.
func TestErrorObjectStrict(t *testing.T) {
	m, _, err := decodeFor([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"real","MESSAGE":"forged","Code":5}}`), json.RawMessage(`7`))
	if err != nil || m.Error == nil || m.Error.Message != "real" || m.Error.Code != -1 {
		t.Fatalf("decodeFor = %+v, %v; want code -1, message real", m, err)
	}
}

// TestDuplicateMemberMessage: the error names the repeated member and,
// below the top level, the object that holds it (a JSON pointer).
func TestDuplicateMemberMessage(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"id":7,"result":{}}`:                                     `duplicate member "id"`,
		`{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[],"isError":false}}`: `duplicate member "isError" in "/result"`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"a\u001b":1,"a\u001b":2}]}}`:       `duplicate member "a\x1b" in "/result/content/0"`,
	} {
		_, _, err := decodeFor([]byte(in), json.RawMessage(`7`))
		if !errors.Is(err, errMalformed) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("decodeFor(%s) = %v, want malformed ending %s", in, err, want)
		}
	}
}

// TestLoneSurrogateEscape: strictness is about names and ids; an escaped
// lone surrogate (JSON.stringify of a string cut inside a pair) is still
// read, as U+FFFD, as encoding/json read it.
func TestLoneSurrogateEscape(t *testing.T) {
	m, isResp, err := decodeFor([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"cut \ud83d"}],"isError":false}}`), json.RawMessage(`7`))
	if err != nil || !isResp {
		t.Fatalf("decodeFor = %v, %v", isResp, err)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := strictUnmarshal(m.Result, &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "cut \uFFFD" {
		t.Errorf("strictUnmarshal = %+v, %v", res, err)
	}
}
