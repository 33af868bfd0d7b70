package replay

// TruncateTaskSteps makes d's index forget the last n recorded requests
// about every task, as a source cut short would: tests check that a
// replay then diverges instead of inventing an answer.
func TruncateTaskSteps(d *Dialer, n int) {
	for _, c := range d.src.calls {
		for _, s := range c.sends {
			if t := s.task; t != nil {
				t.steps = t.steps[:max(0, len(t.steps)-n)]
			}
		}
	}
}
