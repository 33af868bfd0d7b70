package transport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds on the work a remote schema may cost. The validator
// (santhosh-tekuri/jsonschema/v6) has no budget of its own and no context:
// it evaluates every branch of allOf/anyOf/oneOf/$ref without memoising,
// so a schema whose references fan out doubles its work per level (2^N
// evaluations of one instance location) and a recursive oneOf over nested
// arrays doubles it per level of the instance. Before validating, a
// pre-pass computes over the compiled schema graph and the instance the
// worst-case number of schema evaluations the validator may perform; over
// the bound, nothing is validated (and, for arguments, nothing is sent).
const (
	// MaxSchemaBytes bounds a tool schema's source; compiling is linear in it.
	MaxSchemaBytes = 1 << 20
	// MaxSchemaNodes bounds the JSON objects of a tool schema's source
	// (every subschema is one), checked before compiling: the compiler's
	// time grows faster than linearly in them (4,096 properties compile in
	// about 0.5 s, 16,384 in 12 s).
	MaxSchemaNodes = 1 << 12
	// MaxValidationSteps bounds the evaluations of one subschema against
	// one instance location that validating one value may cost, counting
	// every branch ($ref, allOf, anyOf, oneOf, not, if/then/else,
	// dependentSchemas) as evaluated. The worst case measured just under it
	// (issue 13's recursive oneOf, 15 levels: every branch fails and builds
	// an error tree) costs 0.8 s and 100 MB allocated; an ordinary schema
	// costs a few evaluations per value (10,000 result rows: about 40,000).
	MaxValidationSteps = 1 << 17
)

// schemaTooComplex names the bound a schema exceeds.
type schemaTooComplex struct{ bound string }

func (e *schemaTooComplex) Error() string { return e.bound }

// countObjects counts the JSON objects in b, outside strings.
func countObjects(b []byte) int { return int(countOutsideStrings(b, "{")) }

// countOutsideStrings counts the bytes of b that are one of chars and lie
// outside JSON strings: one scan serves the object and the value counts.
func countOutsideStrings(b []byte, chars string) int64 {
	var n int64
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case strings.IndexByte(chars, c) >= 0:
			n++
		}
	}
	return n
}

// schemaGraph is what the pre-pass knows of a compiled schema: its node
// count and the targets a $dynamicRef / $recursiveRef may resolve to.
type schemaGraph struct {
	nodes     int
	paths     int64                           // root-to-node paths of an acyclic graph (saturated at MaxValidationSteps+1); 0 when the graph has a cycle
	dynamic   map[string][]*jsonschema.Schema // $dynamicAnchor name → schemas declaring it
	recursive []*jsonschema.Schema            // schemas with "$recursiveAnchor": true
}

// walkSchema visits every subschema reachable from root once, counting
// them; it fails as soon as there are more than MaxSchemaNodes.
func walkSchema(root *jsonschema.Schema) (*schemaGraph, error) {
	g := &schemaGraph{dynamic: map[string][]*jsonschema.Schema{}}
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		g.nodes++
		if g.nodes > MaxSchemaNodes {
			return nil, &schemaTooComplex{fmt.Sprintf("schema has more than %d subschemas", MaxSchemaNodes)}
		}
		if s.DynamicAnchor != "" {
			g.dynamic[s.DynamicAnchor] = append(g.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			g.recursive = append(g.recursive, s)
		}
		stack = append(stack, inPlace(s)...)
		stack = append(stack, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
		stack = append(stack, s.PrefixItems...)
		stack = append(stack, sortedSchemas(s.Properties)...)
		for _, p := range s.PatternProperties {
			stack = append(stack, p)
		}
		stack = append(stack, schemaOf(s.AdditionalProperties), schemaOf(s.AdditionalItems))
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			stack = append(stack, it)
		case []*jsonschema.Schema:
			stack = append(stack, it...)
		}
		if s.DynamicRef != nil {
			stack = append(stack, s.DynamicRef.Ref)
		}
	}
	g.paths = g.countPaths(root, map[*jsonschema.Schema]int64{}, map[*jsonschema.Schema]bool{})
	return g, nil
}

// children returns every subschema s may apply, in place or to a child
// location, including every target a dynamic reference may resolve to.
func (g *schemaGraph) children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := inPlace(s)
	out = append(out, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems,
		schemaOf(s.AdditionalProperties), schemaOf(s.AdditionalItems))
	out = append(out, s.PrefixItems...)
	out = append(out, sortedSchemas(s.Properties)...)
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		out = append(out, it)
	case []*jsonschema.Schema:
		out = append(out, it...)
	}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
		out = append(out, g.dynamic[s.DynamicRef.Anchor]...)
	}
	if s.RecursiveRef != nil {
		out = append(out, g.recursive...)
	}
	return out
}

// countPaths counts the root-to-node paths from s (every node reached by
// k paths counts k times), saturating above MaxValidationSteps; it
// returns 0 when a cycle is reachable. In an acyclic graph, validating
// one instance location costs at most paths evaluations, so validating a
// value costs at most paths × its number of locations.
func (g *schemaGraph) countPaths(s *jsonschema.Schema, memo map[*jsonschema.Schema]int64, active map[*jsonschema.Schema]bool) int64 {
	if v, ok := memo[s]; ok {
		return v
	}
	if active[s] {
		return 0
	}
	active[s] = true
	defer delete(active, s)
	n := int64(1)
	for _, ch := range g.children(s) {
		if ch == nil {
			continue
		}
		c := g.countPaths(ch, memo, active)
		if c == 0 {
			return 0
		}
		n = min(n+c, MaxValidationSteps+1)
	}
	memo[s] = n
	return n
}

// countValues bounds the number of values (instance locations) in a JSON
// document: each value is the first of its container or follows a comma.
func countValues(b []byte) int64 { return 1 + countOutsideStrings(b, ",{[") }

// inPlace returns the subschemas applied to the same instance location as
// s (static targets only; see schemaGraph for dynamic ones).
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, sortedSchemas(s.DependentSchemas)...)
	for _, k := range sortedKeys(s.Dependencies) {
		out = append(out, schemaOf(s.Dependencies[k]))
	}
	return out
}

func schemaOf(v any) *jsonschema.Schema {
	s, _ := v.(*jsonschema.Schema)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedSchemas(m map[string]*jsonschema.Schema) []*jsonschema.Schema {
	out := make([]*jsonschema.Schema, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// inode is one instance location, numbered so that the pre-pass can
// memoise (schema, location) pairs.
type inode struct {
	obj   map[string]*inode // object members, nil unless an object
	arr   []*inode          // array items, nil unless an array
	isObj bool
	isArr bool
}

// instanceTree builds the location tree of a decoded instance.
func instanceTree(v any) *inode {
	switch v := v.(type) {
	case map[string]any:
		n := &inode{isObj: true, obj: make(map[string]*inode, len(v))}
		for k, c := range v {
			n.obj[k] = instanceTree(c)
		}
		return n
	case []any:
		n := &inode{isArr: true, arr: make([]*inode, len(v))}
		for i, c := range v {
			n.arr[i] = instanceTree(c)
		}
		return n
	}
	return leaf
}

// leaf stands for every scalar location (and every property name): the
// pre-pass's cost of a schema on a scalar does not depend on its value.
var leaf = &inode{}

type costKey struct {
	s *jsonschema.Schema
	n *inode
}

// costing computes the worst-case evaluation count of (schema, location)
// pairs with memoisation; the validator does not memoise, so a pair's cost
// is counted every time it is reached. Costs saturate at limit+1, and the
// pre-pass's own work (distinct pairs and edges) is bounded by 2×limit.
type costing struct {
	g      *schemaGraph
	limit  int64
	memo   map[costKey]int64
	active map[costKey]bool
	work   int64
}

func (c *costing) add(a, b int64) int64 {
	if a+b > c.limit {
		return c.limit + 1
	}
	return a + b
}

func (c *costing) over() bool { return c.work > 2*c.limit }

// cost returns the worst-case number of evaluations of s on n.
func (c *costing) cost(s *jsonschema.Schema, n *inode) int64 {
	if s == nil || c.over() {
		return 0
	}
	k := costKey{s, n}
	if v, ok := c.memo[k]; ok {
		return v
	}
	if c.active[k] { // the validator stops an in-place cycle with an error
		return 1
	}
	c.active[k] = true
	defer delete(c.active, k)
	c.work++
	total := int64(1)
	if s.Enum != nil {
		total = c.add(total, int64(len(s.Enum.Values)))
	}
	each := func(children ...*jsonschema.Schema) {
		for _, ch := range children {
			if ch != nil && total <= c.limit {
				c.work++
				total = c.add(total, c.cost(ch, n))
			}
		}
	}
	each(inPlace(s)...)
	if s.DynamicRef != nil {
		each(c.worst(append([]*jsonschema.Schema{s.DynamicRef.Ref}, c.g.dynamic[s.DynamicRef.Anchor]...), n))
	}
	if s.RecursiveRef != nil {
		each(c.worst(c.g.recursive, n))
	}
	if n.isObj {
		total = c.add(total, c.objectCost(s, n))
	}
	if n.isArr {
		total = c.add(total, c.arrayCost(s, n))
	}
	if !c.over() {
		c.memo[k] = total
	}
	return total
}

// worst returns the candidate whose evaluation on n costs most: a dynamic
// reference resolves to one of them, which one depends on the path.
func (c *costing) worst(cands []*jsonschema.Schema, n *inode) *jsonschema.Schema {
	var best *jsonschema.Schema
	var bestCost int64 = -1
	for _, s := range cands {
		if v := c.cost(s, n); v > bestCost {
			best, bestCost = s, v
		}
	}
	return best
}

// objectCost is the cost of s's object keywords on the members of n,
// counting every pattern and additional schema as applying to every member.
func (c *costing) objectCost(s *jsonschema.Schema, n *inode) int64 {
	total := int64(0)
	names := c.cost(s.PropertyNames, leaf)
	for name, child := range n.obj {
		if total > c.limit || c.over() {
			break
		}
		c.work++
		total = c.add(total, names)
		total = c.add(total, c.cost(s.Properties[name], child))
		for _, p := range s.PatternProperties {
			total = c.add(total, c.cost(p, child))
		}
		total = c.add(total, c.cost(schemaOf(s.AdditionalProperties), child))
		total = c.add(total, c.cost(s.UnevaluatedProperties, child))
	}
	return total
}

// arrayCost is the cost of s's array keywords on the items of n.
func (c *costing) arrayCost(s *jsonschema.Schema, n *inode) int64 {
	total := int64(0)
	for i, child := range n.arr {
		if total > c.limit || c.over() {
			break
		}
		c.work++
		if i < len(s.PrefixItems) {
			total = c.add(total, c.cost(s.PrefixItems[i], child))
		} else {
			total = c.add(total, c.cost(s.Items2020, child))
		}
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			total = c.add(total, c.cost(it, child))
		case []*jsonschema.Schema:
			if i < len(it) {
				total = c.add(total, c.cost(it[i], child))
			} else {
				total = c.add(total, c.cost(schemaOf(s.AdditionalItems), child))
			}
		}
		total = c.add(total, c.cost(s.Contains, child))
		total = c.add(total, c.cost(s.UnevaluatedItems, child))
	}
	return total
}

// checkBudget fails when validating inst against sch may cost more than
// MaxValidationSteps evaluations.
func checkBudget(sch *jsonschema.Schema, g *schemaGraph, doc []byte, inst any) error {
	if g.paths > 0 && g.paths <= MaxValidationSteps && g.paths*countValues(doc) <= MaxValidationSteps {
		return nil // acyclic and small enough: the static bound suffices
	}
	c := &costing{g: g, limit: MaxValidationSteps, memo: map[costKey]int64{}, active: map[costKey]bool{}}
	total := c.cost(sch, instanceTree(inst))
	if total > MaxValidationSteps || c.over() {
		return &schemaTooComplex{fmt.Sprintf("validating this value may take more than %d schema evaluations", MaxValidationSteps)}
	}
	return nil
}
