package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ResolveInputs returns the inputs a run uses: the given values, checked
// against spec.inputs, with defaults filled in. Every problem is reported,
// each naming its input. A declared input that is neither given, required
// nor defaulted is set to null.
//
// Numbers given as json.Number (as ParseInputFlag returns them) become int
// or float64; for an input of type string, a number or boolean given on the
// command line is taken as its text, so --input id=42 works for a string id.
//
// When the workflow has no spec.inputs at all, every given input is accepted
// as is: templates may then name any input (docs/WORKFLOWS.md declares none).
func ResolveInputs(w *Workflow, given map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(given))
	if w.Spec.Inputs == nil {
		for k, v := range given {
			out[k] = normalize(v)
		}
		return out, nil
	}
	var errs []error
	for _, k := range sortedKeys(given) {
		if _, ok := w.Spec.Inputs[k]; !ok {
			errs = append(errs, fmt.Errorf("input %q is not declared in spec.inputs (declared: %s)", k, strings.Join(inputNames(w), ", ")))
		}
	}
	for _, name := range inputNames(w) {
		in := w.Spec.Inputs[name]
		v, ok := given[name]
		switch {
		case ok:
			v = coerce(v, in.Type)
			if err := checkType(v, in.Type); err != nil {
				errs = append(errs, fmt.Errorf("input %q: %w", name, err))
				continue
			}
			out[name] = v
		case in.Default != nil:
			out[name] = normalize(in.Default)
		case in.IsRequired():
			errs = append(errs, fmt.Errorf("input %q is required (%s): pass --input %s=VALUE", name, typeOrAny(in.Type), name))
		default:
			out[name] = nil
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func inputNames(w *Workflow) []string {
	names := make([]string, 0, len(w.Spec.Inputs))
	for k := range w.Spec.Inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func typeOrAny(t string) string {
	if t == "" {
		return "any type"
	}
	return "type " + t
}

// coerce turns command-line scalars into the declared type where that is
// lossless, and normalizes numbers.
func coerce(v any, typ string) any {
	if typ == "string" {
		switch x := v.(type) {
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
	}
	return normalize(v)
}

// normalize replaces json.Number (deeply) with int when it is an integer
// that fits, else float64.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(x.String(), 10, 64); err == nil && i == int64(int(i)) {
			return int(i)
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	}
	return v
}

// checkType reports whether v has the JSON type typ ("" accepts anything).
func checkType(v any, typ string) error {
	got := jsonType(v)
	ok := false
	switch typ {
	case "":
		return nil
	case "number":
		ok = got == "number" || got == "integer"
		if f, isF := v.(float64); isF && (math.IsNaN(f) || math.IsInf(f, 0)) {
			ok = false
		}
	default:
		ok = got == typ
	}
	if !ok {
		return fmt.Errorf("want %s, got %s %s", typ, got, shortJSON(v))
	}
	return nil
}

func shortJSON(v any) string {
	s := stringify(v)
	if _, isStr := v.(string); isStr {
		s = strconv.Quote(s)
	}
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// ParseInputFlag splits a --input flag "key=value". The value is parsed as
// JSON when it is valid JSON (numbers as json.Number), else taken as a string:
// n=3 gives json.Number("3"), tags=["a"] a list, q=hello the string "hello".
func ParseInputFlag(kv string) (string, any, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", nil, fmt.Errorf("--input %q: want key=value", kv)
	}
	if !isIdent(k) {
		return "", nil, fmt.Errorf("--input %q: input name %q must match [A-Za-z_][A-Za-z0-9_-]*", kv, k)
	}
	if json.Valid([]byte(v)) {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err == nil {
			return k, x, nil
		}
	}
	return k, v, nil
}

// LoadInputsFile reads inputs from a JSON or YAML file holding one mapping
// of input names to values. Problems in the file come back as *Diagnostics.
func LoadInputsFile(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load inputs: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load inputs %s: %w", path, err)
	}
	if len(src) > MaxFileBytes {
		return nil, fmt.Errorf("load inputs %s: file is larger than %d bytes (1 MiB)", path, MaxFileBytes)
	}
	return parseInputs(path, src)
}

func parseInputs(path string, src []byte) (m map[string]any, err error) {
	d := newDecoder(path)
	d.expect = "a mapping of input names to values"
	if t := bytes.TrimSpace(src); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		// JSON proper: keep number text exact.
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		var x map[string]any
		if err := dec.Decode(&x); err == nil {
			return normalize(x).(map[string]any), nil
		}
	}
	root := d.parseYAML(src)
	if root != nil {
		v := d.toAny(root, "")
		m, _ = v.(map[string]any)
	}
	if len(d.diags) > 0 {
		ds := d.diags
		ds.sort()
		return nil, &ds
	}
	return m, nil
}
