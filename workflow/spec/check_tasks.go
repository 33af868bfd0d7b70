package spec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func (c *checker) tasks() {
	w := c.w
	if len(w.Spec.Tasks) == 0 && c.has("spec") {
		c.errf("spec.tasks", "spec.tasks must list at least one task")
	}
	first := map[string]int{} // task id → line of its first definition
	for i, t := range w.Spec.Tasks {
		p := fmt.Sprintf("spec.tasks[%d]", i)
		switch {
		case t.ID == "":
			c.errf(p+".id", "task id is required")
		case !isIdent(t.ID):
			c.errf(p+".id", "task id %q must match [A-Za-z_][A-Za-z0-9_-]*", t.ID)
		default:
			if line, dup := first[t.ID]; dup {
				c.errf(p+".id", "duplicate task id %q (first defined at line %d)", t.ID, line)
			} else {
				first[t.ID] = c.at(p + ".id").line
			}
		}
		c.uses(p, t)
		c.with(p, t)
		c.needs(p, i, t)
		if t.OutputSchema != nil {
			c.outputSchema(p+".outputSchema", t.OutputSchema)
		}
		if c.has(p+".timeoutSeconds") && t.TimeoutSeconds < 1 {
			c.errf(p+".timeoutSeconds", "timeoutSeconds must be at least 1, got %d", t.TimeoutSeconds)
		}
	}
	c.g = w.graph()
	c.cycles()
	for i, t := range w.Spec.Tasks {
		c.walkTemplates(fmt.Sprintf("spec.tasks[%d].with.arguments", i), t.With.Arguments, i)
	}
}

func (c *checker) uses(p string, t TaskSpec) {
	switch name := t.ActionName(); {
	case t.Uses == "":
		c.errf(p+".uses", "uses is required, as action:<name>")
	case name == "":
		c.errf(p+".uses", "uses %q must have the form action:<name>", t.Uses)
	case len(c.w.Spec.Actions) == 0:
		c.errf(p+".uses", "action %q is not declared: spec.actions is empty", name)
	default:
		if _, ok := c.w.Spec.Actions[name]; !ok {
			c.errf(p+".uses", "action %q is not declared in spec.actions (declared: %s)", name, strings.Join(sortedNames(c.w.Spec.Actions), ", "))
		}
	}
}

func (c *checker) with(p string, t TaskSpec) {
	if !c.has(p + ".with") {
		c.errf(p+".with", "with is required: {server, tool, arguments}")
		return
	}
	switch s := t.With.Server; {
	case s == "":
		c.errf(p+".with.server", "with.server is required: the name of a remote under spec.mcpServers")
	case strings.Contains(s, "${{"):
		c.errf(p+".with.server", "templates are not allowed in with.server")
	case len(c.w.Spec.MCPServers) == 0:
		c.errf(p+".with.server", "server %q is not declared: spec.mcpServers is empty", s)
	default:
		if _, ok := c.w.Spec.MCPServers[s]; !ok {
			c.errf(p+".with.server", "server %q is not declared in spec.mcpServers (declared: %s)", s, strings.Join(sortedNames(c.w.Spec.MCPServers), ", "))
		}
	}
	switch tool := t.With.Tool; {
	case strings.TrimSpace(tool) == "":
		c.errf(p+".with.tool", "with.tool is required: the tool to call")
	case strings.Contains(tool, "${{"):
		c.errf(p+".with.tool", "templates are not allowed in with.tool")
	}
}

func (c *checker) needs(p string, i int, t TaskSpec) {
	seen := map[string]bool{}
	for j, n := range t.Needs {
		q := fmt.Sprintf("%s.needs[%d]", p, j)
		switch {
		case n == t.ID:
			c.errf(q, "task %q cannot need itself", n)
		case seen[n]:
			c.errf(q, "task %q is listed twice in needs", n)
		case c.w.taskIndex(n) < 0:
			c.errf(q, "needs names task %q, which is not declared in spec.tasks", n)
		}
		seen[n] = true
	}
}

// cycles reports each needs cycle once, at its first task in file order.
func (c *checker) cycles() {
	w := c.w
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(w.Spec.Tasks))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, j := range c.g[i] {
			switch color[j] {
			case white:
				visit(j)
			case grey:
				k := len(stack) - 1
				for stack[k] != j {
					k--
				}
				c.reportCycle(stack[k:], reported)
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range w.Spec.Tasks {
		if color[i] == white {
			visit(i)
		}
	}
}

func (c *checker) reportCycle(cyc []int, reported map[string]bool) {
	// Rotate so that the cycle starts at its first task in file order.
	m := 0
	for k, i := range cyc {
		if i < cyc[m] {
			m = k
		}
	}
	cyc = append(append([]int{}, cyc[m:]...), cyc[:m]...)
	ids := make([]string, 0, len(cyc)+1)
	for _, i := range cyc {
		ids = append(ids, c.w.Spec.Tasks[i].ID)
	}
	ids = append(ids, ids[0])
	key := strings.Join(ids, " -> ")
	if reported[key] {
		return
	}
	reported[key] = true
	p := fmt.Sprintf("spec.tasks[%d].needs", cyc[0])
	c.errf(p, "needs cycle: %s", key)
}

// outputSchema compiles the schema so that a broken one fails the check,
// not the run. References to other documents are refused: a workflow file
// must not make the checker read files or the network.
func (c *checker) outputSchema(p string, schema map[string]any) {
	comp := jsonschema.NewCompiler()
	comp.UseLoader(noLoader{})
	const url = "agentctl:///outputSchema.json"
	if err := comp.AddResource(url, schema); err != nil {
		c.errf(p, "invalid JSON Schema: %v", oneLine(err.Error()))
		return
	}
	if _, err := comp.Compile(url); err != nil {
		var ve *jsonschema.SchemaValidationError
		if errors.As(err, &ve) {
			var leaf *jsonschema.ValidationError
			if errors.As(ve.Err, &leaf) {
				leaf = firstLeaf(leaf)
				q := p
				for _, s := range leaf.InstanceLocation {
					if idx := q + "[" + s + "]"; c.has(idx) {
						q = idx
					} else {
						q = joinPath(q, s)
					}
				}
				if !c.has(q) {
					q = p
				}
				c.errf(q, "invalid JSON Schema: %s", oneLine(leaf.Error()))
				return
			}
		}
		c.errf(p, "invalid JSON Schema: %s", oneLine(err.Error()))
	}
}

func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "agentctl:///outputSchema.json", "outputSchema")
	return strings.Join(strings.Fields(s), " ")
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("outputSchema may not reference other documents (%s)", url)
}
