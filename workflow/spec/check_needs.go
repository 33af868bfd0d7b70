package spec

import "slices"

// taskIndex returns the index of the task with the given id, or -1.
func (w *Workflow) taskIndex(id string) int {
	for i, t := range w.Spec.Tasks {
		if t.ID == id {
			return i
		}
	}
	return -1
}

// graph returns, for each task, the indexes of the tasks it waits for (in
// file order): its needs when written (needs: [] means none); otherwise the
// previous task plus every earlier task its arguments name in a template.
// Undeclared names are skipped. A repeated id resolves to its first task.
func (w *Workflow) graph() [][]int {
	index := make(map[string]int, len(w.Spec.Tasks))
	for i, t := range w.Spec.Tasks {
		if _, dup := index[t.ID]; !dup {
			index[t.ID] = i
		}
	}
	g := make([][]int, len(w.Spec.Tasks))
	for i, t := range w.Spec.Tasks {
		var deps []int
		add := func(id string, earlierOnly bool) {
			j, ok := index[id]
			if ok && j != i && (!earlierOnly || j < i) && !slices.Contains(deps, j) {
				deps = append(deps, j)
			}
		}
		if t.Needs != nil {
			for _, n := range t.Needs {
				add(n, false)
			}
		} else {
			if i > 0 {
				add(w.Spec.Tasks[i-1].ID, true)
			}
			refs, _ := templateRefs(t.With.Arguments)
			for _, r := range refs {
				if r.root == "tasks" {
					add(r.name, true)
				}
			}
		}
		slices.Sort(deps)
		g[i] = deps
	}
	return g
}

// reaches reports whether task i transitively needs task j in graph g.
func reaches(g [][]int, i, j int) bool {
	seen := make([]bool, len(g))
	stack := []int{i}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range g[k] {
			if n == j {
				return true
			}
			if !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	return false
}

// NeedsByIndex returns, for every task in file order, the indexes of the
// tasks it waits for (as Needs), computed in one pass: a scheduler asking
// Needs task by task would pay for the whole graph once per task.
func (w *Workflow) NeedsByIndex() [][]int { return w.graph() }

// Needs returns the ids of the tasks the task waits for, in file order: its
// needs when written (needs: [] means none), otherwise the previous task and
// every earlier task its arguments name in a template.
func (w *Workflow) Needs(id string) []string {
	i := w.taskIndex(id)
	if i < 0 {
		return nil
	}
	deps := w.graph()[i]
	out := make([]string, len(deps))
	for k, j := range deps {
		out[k] = w.Spec.Tasks[j].ID
	}
	return out
}

// Order groups the task ids into levels: every task comes in a later level
// than all the tasks it needs, so the tasks of one level may run together.
// Tasks keep file order within a level. Tasks in a needs cycle (which Parse
// refuses) are placed in a last level.
func (w *Workflow) Order() [][]string {
	g := w.graph()
	n := len(g)
	level := make([]int, n)
	state := make([]int, n) // 0 new, 1 visiting, 2 done
	var depth func(i int) int
	depth = func(i int) int {
		switch state[i] {
		case 1:
			return n // a cycle
		case 2:
			return level[i]
		}
		state[i] = 1
		l := 0
		for _, j := range g[i] {
			l = max(l, depth(j)+1)
		}
		l = min(l, n)
		state[i], level[i] = 2, l
		return l
	}
	var levels [][]string
	for i, t := range w.Spec.Tasks {
		l := depth(i)
		for len(levels) <= l {
			levels = append(levels, nil)
		}
		levels[l] = append(levels[l], t.ID)
	}
	return slices.DeleteFunc(levels, func(l []string) bool { return len(l) == 0 })
}

// TasksInOrder returns the tasks in an order that runs every task after the
// tasks it needs: repeatedly the first task in file order whose needs are
// all done. Tasks in a needs cycle (which Parse refuses) come last.
func (w *Workflow) TasksInOrder() []TaskSpec {
	g := w.graph()
	n := len(g)
	done := make([]bool, n)
	waiting := make([]int, n)  // needs not yet done
	users := make([][]int, n)  // tasks that need i
	ready := make([]int, 0, n) // min-heap by index would do; n is small
	out := make([]TaskSpec, 0, n)
	for i, deps := range g {
		waiting[i] = len(deps)
		for _, j := range deps {
			users[j] = append(users[j], i)
		}
		if len(deps) == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		k := slices.Index(ready, slices.Min(ready))
		i := ready[k]
		ready = slices.Delete(ready, k, k+1)
		done[i] = true
		out = append(out, w.Spec.Tasks[i])
		for _, u := range users[i] {
			if waiting[u]--; waiting[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	for i := range g {
		if !done[i] {
			out = append(out, w.Spec.Tasks[i])
		}
	}
	return out
}
