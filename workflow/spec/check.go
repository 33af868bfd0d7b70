package spec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/transport"
)

// checker runs the semantic checks on a decoded workflow. Each problem is
// reported at the position of the field at fault, or of its nearest
// ancestor present in the file when the field is missing.
type checker struct {
	w     *Workflow
	bad   map[string]bool // paths the decoder already complained about
	diags Diagnostics
	g     [][]int // task dependency graph, set by tasks()
}

// check returns every semantic problem of w. bad lists the paths the decoder
// could not decode; problems under them are not reported twice.
func check(w *Workflow, bad map[string]bool) Diagnostics {
	c := &checker{w: w, bad: bad}
	c.header()
	c.inputs()
	c.policy()
	c.servers()
	c.actions()
	c.concurrency()
	c.tasks()
	c.outputs()
	return c.diags
}

// has reports whether path was written in the file.
func (c *checker) has(path string) bool {
	_, ok := c.w.pos.val[path]
	return ok
}

// at returns the position of path, or of the key of its nearest ancestor.
func (c *checker) at(path string) pos {
	if p, ok := c.w.pos.val[path]; ok {
		return p
	}
	for path != "" {
		path = parentPath(path)
		if p, ok := c.w.pos.key[path]; ok {
			return p
		}
		if p, ok := c.w.pos.val[path]; ok {
			return p
		}
	}
	return pos{1, 1}
}

// parentPath drops the last segment of a field path.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func (c *checker) suppressed(path string) bool {
	for p := path; ; p = parentPath(p) {
		if c.bad[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// badUnder reports whether the decoder failed on prefix or anything below it.
func (c *checker) badUnder(prefix string) bool {
	for p := range c.bad {
		if p == prefix || strings.HasPrefix(p, prefix+".") || strings.HasPrefix(p, prefix+"[") {
			return true
		}
	}
	return false
}

func (c *checker) report(p pos, path string, policy bool, format string, args ...any) {
	if c.suppressed(path) {
		return
	}
	c.diags = append(c.diags, Diagnostic{File: c.w.File, Line: p.line, Col: p.col, Field: path, Message: fmt.Sprintf(format, args...), Policy: policy})
}

// errf reports a problem with the value at path.
func (c *checker) errf(path, format string, args ...any) {
	c.report(c.at(path), path, false, format, args...)
}

// keyErrf reports a problem with the key at path (a name chosen by the author).
func (c *checker) keyErrf(path, format string, args ...any) {
	p, ok := c.w.pos.key[path]
	if !ok {
		p = c.at(path)
	}
	c.report(p, path, false, format, args...)
}

// policyf reports a value the workflow's own policy refuses.
func (c *checker) policyf(path, format string, args ...any) {
	c.report(c.at(path), path, true, format, args...)
}

func (c *checker) header() {
	w := c.w
	switch {
	case w.APIVersion == "":
		c.errf("apiVersion", "apiVersion is required; want %s", APIVersion)
	case w.APIVersion != APIVersion:
		c.errf("apiVersion", "unsupported apiVersion %q; want %s", w.APIVersion, APIVersion)
	}
	switch {
	case w.Kind == "":
		c.errf("kind", "kind is required; want %s", Kind)
	case w.Kind != Kind:
		c.errf("kind", "unsupported kind %q; want %s", w.Kind, Kind)
	}
	if !c.has("metadata") {
		c.errf("metadata", "metadata is required, with at least a name")
	} else if strings.TrimSpace(w.Metadata.Name) == "" {
		c.errf("metadata.name", "metadata.name is required")
	}
	if !c.has("spec") {
		c.errf("spec", "spec is required, with at least one task")
	}
}

var inputTypes = []string{"string", "number", "integer", "boolean", "object", "array"}

func (c *checker) inputs() {
	for _, name := range sortedNames(c.w.Spec.Inputs) {
		in := c.w.Spec.Inputs[name]
		p := joinPath("spec.inputs", name)
		if !isIdent(name) {
			c.keyErrf(p, "input name %q must match [A-Za-z_][A-Za-z0-9_-]*", name)
		}
		if c.has(p+".type") && !contains(inputTypes, in.Type) {
			c.errf(p+".type", "unknown type %q; want one of %s", in.Type, strings.Join(inputTypes, ", "))
			continue
		}
		if in.Default != nil {
			if err := checkType(in.Default, in.Type); err != nil {
				c.errf(p+".default", "default does not match the input's type: %v", err)
			}
			if in.Required != nil && *in.Required {
				c.errf(p+".required", "required: true contradicts the default; drop one of them")
			}
		}
	}
}

var idempotencies = []string{IdempotencyPure, IdempotencyIdempotent, IdempotencyKeyed, IdempotencyAtMostOnce, IdempotencyUnknown}

func (c *checker) actions() {
	for _, name := range sortedNames(c.w.Spec.Actions) {
		a := c.w.Spec.Actions[name]
		p := joinPath("spec.actions", name)
		if !isIdent(name) {
			c.keyErrf(p, "action name %q must match [A-Za-z_][A-Za-z0-9_-]*", name)
		}
		switch {
		case a.Kind == "":
			c.errf(p+".kind", "kind is required; want %s", ActionKindMCPCall)
		case a.Kind != ActionKindMCPCall:
			c.errf(p+".kind", "unknown action kind %q; want %s", a.Kind, ActionKindMCPCall)
		}
		if c.has(p+".idempotency") && !contains(idempotencies, a.Idempotency) {
			c.errf(p+".idempotency", "unknown idempotency %q; want one of %s", a.Idempotency, strings.Join(idempotencies, ", "))
		}
		if a.Retry != nil {
			c.retry(p+".retry", *a.Retry)
		}
		if c.has(p+".taskTtlSeconds") && a.TaskTTLSeconds < 1 {
			c.errf(p+".taskTtlSeconds", "taskTtlSeconds must be at least 1, got %d", a.TaskTTLSeconds)
		}
		if a.Elicitation != nil {
			c.elicitation(p+".elicitation", *a.Elicitation)
		}
	}
}

var elicitModes = []string{transport.ElicitDecline, transport.ElicitDefaults, transport.ElicitValues}

// elicitation checks an action's elicitation answers.
func (c *checker) elicitation(p string, e ElicitationSpec) {
	if !contains(elicitModes, e.Mode) {
		c.errf(p+".mode", "unknown elicitation mode %q; want one of %s", e.Mode, strings.Join(elicitModes, ", "))
		return
	}
	if len(e.Values) > 0 && e.Mode != transport.ElicitValues {
		c.errf(p+".values", "values are used only with mode: values (mode is %s)", e.Mode)
	}
	for _, k := range sortedNames(e.Values) {
		switch e.Values[k].(type) {
		case string, bool, int, int64, uint64, float64:
		default:
			c.errf(joinPath(p+".values", k), "an elicitation answer is a string, number or boolean")
		}
	}
}

// concurrency checks spec.concurrency: at least 1 when written.
func (c *checker) concurrency() {
	if c.has("spec.concurrency") && c.w.Spec.Concurrency < 1 {
		c.errf("spec.concurrency", "concurrency must be at least 1, got %d", c.w.Spec.Concurrency)
	}
}

// retry checks an action's retry policy.
func (c *checker) retry(p string, r RetrySpec) {
	if !c.has(p+".maxAttempts") && c.has(p) {
		c.errf(p+".maxAttempts", "retry.maxAttempts is required (attempts in all, at least 1)")
	} else if r.MaxAttempts < 1 && c.has(p+".maxAttempts") {
		c.errf(p+".maxAttempts", "retry.maxAttempts must be at least 1, got %d", r.MaxAttempts)
	}
	if r.InitialIntervalSeconds < 0 {
		c.errf(p+".initialIntervalSeconds", "retry.initialIntervalSeconds must not be negative, got %g", r.InitialIntervalSeconds)
	}
	if c.has(p+".backoffFactor") && r.BackoffFactor < 1 {
		c.errf(p+".backoffFactor", "retry.backoffFactor must be at least 1, got %g", r.BackoffFactor)
	}
	if r.MaxIntervalSeconds < 0 {
		c.errf(p+".maxIntervalSeconds", "retry.maxIntervalSeconds must not be negative, got %g", r.MaxIntervalSeconds)
	}
}

func (c *checker) outputs() {
	c.walkTemplates("spec.outputs", c.w.Spec.Outputs, -1)
}

// walkTemplates checks every template in the strings of v. task is the index
// of the task whose arguments v is, or -1 for outputs (which may name any task).
func (c *checker) walkTemplates(path string, v any, task int) {
	switch x := v.(type) {
	case string:
		refs, err := templateRefs(x)
		if err != nil {
			c.errf(path, "%v", err)
			return
		}
		for _, r := range refs {
			c.checkRef(path, r, task)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			c.walkTemplates(joinPath(path, k), x[k], task)
		}
	case []any:
		for i, e := range x {
			c.walkTemplates(path+"["+strconv.Itoa(i)+"]", e, task)
		}
	}
}

func (c *checker) checkRef(path string, r *tref, task int) {
	w := c.w
	if r.root == "inputs" {
		if w.Spec.Inputs == nil {
			return // no spec.inputs: any input may be named (docs/WORKFLOWS.md)
		}
		in, ok := w.Spec.Inputs[r.name]
		if !ok {
			c.errf(path, "template %q names input %q, which is not declared in spec.inputs (declared: %s)", r.text, r.name, strings.Join(sortedNames(w.Spec.Inputs), ", "))
			return
		}
		switch in.Type {
		case "string", "number", "integer", "boolean":
			if len(r.path) > 0 {
				c.errf(path, "template %q: input %q is of type %s and has no %s", r.text, r.name, in.Type, r.path[0])
			}
		case "array":
			if len(r.path) > 0 && !r.path[0].isIdx {
				c.errf(path, "template %q: input %q is an array; use [n], not %s", r.text, r.name, r.path[0])
			}
		case "object":
			if len(r.path) > 0 && r.path[0].isIdx {
				c.errf(path, "template %q: input %q is an object; cannot index it with %s", r.text, r.name, r.path[0])
			}
		}
		return
	}
	dep := w.taskIndex(r.name)
	switch {
	case dep < 0:
		c.errf(path, "template %q names task %q, which is not declared in spec.tasks", r.text, r.name)
	case task < 0:
		// outputs may name any task
	case dep == task:
		c.errf(path, "template %q: a task cannot use its own output", r.text)
	case w.Spec.Tasks[task].Needs == nil && dep > task:
		c.errf(path, "template %q names task %q, which comes later in the file; move it earlier or list it in needs", r.text, r.name)
	case w.Spec.Tasks[task].Needs != nil && !reaches(c.g, task, dep):
		c.errf(path, "template %q names task %q, which task %q does not need; add %q to its needs", r.text, r.name, w.Spec.Tasks[task].ID, r.name)
	}
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
