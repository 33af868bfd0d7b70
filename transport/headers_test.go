package transport

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHeaderAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name, schema, err string
		headers           []string
	}{
		{"valid", `{"properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}`, "", []string{"N", "Region"}},
		{"nested", `{"properties":{"o":{"type":"object","properties":{"b":{"type":"boolean","x-mcp-header":"B"}}}}}`, "", []string{"B"}},
		{"empty", `{"properties":{"v":{"type":"string","x-mcp-header":""}}}`, "non-empty", nil},
		{"object", `{"properties":{"v":{"type":"object","x-mcp-header":"V"}}}`, "string, integer or boolean", nil},
		{"number", `{"properties":{"v":{"type":"number","x-mcp-header":"V"}}}`, "string, integer or boolean", nil},
		{"null", `{"properties":{"v":{"type":"null","x-mcp-header":"V"}}}`, "string, integer or boolean", nil},
		{"duplicate case", `{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`, "repeats", nil},
		{"space", `{"properties":{"v":{"type":"string","x-mcp-header":"My Region"}}}`, "not allowed", nil},
		{"colon", `{"properties":{"v":{"type":"string","x-mcp-header":"Region:Primary"}}}`, "not allowed", nil},
		{"non-ascii", `{"properties":{"v":{"type":"string","x-mcp-header":"Région"}}}`, "not allowed", nil},
		{"control", `{"properties":{"v":{"type":"string","x-mcp-header":"Region\t1"}}}`, "not allowed", nil},
		{"not a string", `{"properties":{"v":{"type":"string","x-mcp-header":7}}}`, "non-empty string", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := headerAnnotations(json.RawMessage(tc.schema))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range bs {
				got = append(got, b.Header)
			}
			if strings.Join(got, ",") != strings.Join(tc.headers, ",") {
				t.Fatalf("headers %q, want %q", got, tc.headers)
			}
		})
	}
}

func TestParamHeaders(t *testing.T) {
	bs := []headerBinding{{[]string{"s"}, "S"}, {[]string{"i"}, "I"}, {[]string{"b"}, "B"}, {[]string{"n"}, "N"},
		{[]string{"f"}, "F"}, {[]string{"absent"}, "Absent"}, {[]string{"o", "x"}, "X"}, {[]string{"u"}, "U"}, {[]string{"w"}, "W"}, {[]string{"e"}, "E"}}
	args := json.RawMessage(`{"s":"us-west1","i":42,"b":false,"n":null,"f":3.5,"o":{"x":"in"},"u":"Hello, 世界","w":"line1\nline2","e":""}`)
	got := paramHeaders(bs, args)
	want := map[string]string{"Mcp-Param-S": "us-west1", "Mcp-Param-I": "42", "Mcp-Param-B": "false", "Mcp-Param-X": "in",
		"Mcp-Param-U": "=?base64?SGVsbG8sIOS4lueVjA==?=", "Mcp-Param-W": "=?base64?bGluZTEKbGluZTI=?=", "Mcp-Param-E": ""}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if v := encodeHeaderValue(" padded "); v != "=?base64?IHBhZGRlZCA=?=" {
		t.Errorf("leading/trailing space: %q", v)
	}
	if v := encodeHeaderValue("=?base64?abc?="); !strings.HasPrefix(v, "=?base64?PT9i") {
		t.Errorf("a value that looks wrapped must be wrapped: %q", v)
	}
}

func TestInputRequiredAnswer(t *testing.T) {
	ir, err := ParseInputRequired(json.RawMessage(`{"resultType":"input_required","requestState":"s\u00e9t","inputRequests":{
		"a":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","default":true}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ir.Answer(nil)
	if err != nil || string(ans.Responses["a"]) != `{"action":"decline"}` || ans.state == nil || *ans.state != "sét" {
		t.Fatalf("nil policy: %v %+v", err, ans)
	}
	ans, _ = ir.Answer(&ElicitationPolicy{Mode: ElicitDefaults})
	if string(ans.Responses["a"]) != `{"action":"accept","content":{"ok":true}}` {
		t.Fatalf("defaults: %s", ans.Responses["a"])
	}
	for _, m := range []string{"sampling/createMessage", "roots/list"} {
		ir, _ := ParseInputRequired(json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"` + m + `","params":{}}}}`))
		if _, err := ir.Answer(&ElicitationPolicy{Mode: ElicitDefaults}); KindOf(err) != KindUnsupported || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %v, want unsupported naming it", m, err)
		}
	}
	if _, err := ParseInputRequired(json.RawMessage(`{"resultType":"input_required"}`)); KindOf(err) != KindMalformed {
		t.Errorf("neither inputRequests nor requestState: %v", err)
	}
}
