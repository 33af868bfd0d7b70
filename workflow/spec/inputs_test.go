package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func inputsWorkflow(t *testing.T) *Workflow {
	t.Helper()
	return mustParse(t, strings.Replace(wf(task("a", nil, "")), "spec:\n", `spec:
  inputs:
    query: { type: string, default: mcp }
    n: { type: integer }
    ratio: { type: number, required: false }
    flag: { type: boolean, default: false }
    tags: { type: array, default: [x] }
    opts: { type: object, required: false }
    anything: { required: false }
`, 1))
}

func TestResolveInputs(t *testing.T) {
	w := inputsWorkflow(t)
	base := map[string]any{"query": "mcp", "n": 1, "ratio": nil, "flag": false, "tags": []any{"x"}, "opts": nil, "anything": nil}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		given   map[string]any
		want    map[string]any
		wantErr []string
	}{
		{"defaults", map[string]any{"n": 1}, base, nil},
		{"all given", map[string]any{"n": 2, "query": "q", "ratio": 0.5, "flag": true, "tags": []any{}, "opts": map[string]any{"a": 1}, "anything": "z"},
			with("n", 2, "query", "q", "ratio", 0.5, "flag", true, "tags", []any{}, "opts", map[string]any{"a": 1}, "anything", "z"), nil},
		{"json numbers from flags", map[string]any{"n": json.Number("7"), "ratio": json.Number("1.5"), "query": json.Number("42")},
			with("n", 7, "ratio", 1.5, "query", "42"), nil},
		{"integer as float", map[string]any{"n": 3.0}, with("n", 3.0), nil},
		{"number accepts integer", map[string]any{"n": 1, "ratio": 2}, with("ratio", 2), nil},
		{"bool to string", map[string]any{"n": 1, "query": true}, with("query", "true"), nil},
		{"missing required", map[string]any{}, nil, []string{`input "n" is required (type integer)`}},
		{"wrong types", map[string]any{"n": 1.5, "flag": "yes", "tags": "a", "opts": []any{}},
			nil, []string{`input "n": want integer, got number 1.5`, `input "flag": want boolean, got string "yes"`, `input "tags": want array`, `input "opts": want object`}},
		{"undeclared", map[string]any{"n": 1, "nope": 1}, nil, []string{`input "nope" is not declared in spec.inputs`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveInputs(w, tt.given)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, got %v", got)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParseInputFlag(t *testing.T) {
	tests := []struct {
		in   string
		k    string
		v    any
		fail bool
	}{
		{"q=hello", "q", "hello", false},
		{"q=", "q", "", false},
		{"n=3", "n", json.Number("3"), false},
		{"x=1.5e3", "x", json.Number("1.5e3"), false},
		{"b=true", "b", true, false},
		{"z=null", "z", nil, false},
		{`s="quoted"`, "s", "quoted", false},
		{`l=["a",1]`, "l", []any{"a", json.Number("1")}, false},
		{`o={"a":{"b":2}}`, "o", map[string]any{"a": map[string]any{"b": json.Number("2")}}, false},
		{"q=a=b", "q", "a=b", false},
		{"q={not json", "q", "{not json", false},
		{"q= spaced ", "q", " spaced ", false},
		{"noequals", "", nil, true},
		{"=v", "", nil, true},
		{"bad key=v", "", nil, true},
	}
	for _, tt := range tests {
		k, v, err := ParseInputFlag(tt.in)
		if tt.fail {
			if err == nil {
				t.Errorf("ParseInputFlag(%q) = %q, %#v; want error", tt.in, k, v)
			}
			continue
		}
		if err != nil || k != tt.k || !reflect.DeepEqual(v, tt.v) {
			t.Errorf("ParseInputFlag(%q) = %q, %#v, %v; want %q, %#v", tt.in, k, v, err, tt.k, tt.v)
		}
	}
}

func TestLoadInputsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := map[string]any{"q": "x", "n": 2, "f": 1.5, "l": []any{"a"}, "o": map[string]any{"k": true}}
	for _, p := range []string{
		write("in.json", `{"q": "x", "n": 2, "f": 1.5, "l": ["a"], "o": {"k": true}}`),
		write("in.yaml", "q: x\nn: 2\nf: 1.5\nl: [a]\no: {k: true}\n"),
	} {
		got, err := LoadInputsFile(p)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("LoadInputsFile(%s) = %#v, %v", p, got, err)
		}
	}
	for name, src := range map[string]string{"list.yaml": "- a\n", "dup.yaml": "a: 1\na: 2\n", "syntax.yaml": "a: [1\n"} {
		_, err := LoadInputsFile(write(name, src))
		var ds *Diagnostics
		if !errors.As(err, &ds) || (*ds)[0].Line < 1 {
			t.Errorf("LoadInputsFile(%s) = %v, want diagnostics with a line", name, err)
		}
	}
	if _, err := LoadInputsFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("LoadInputsFile(missing) succeeded")
	}
}
