package workflow

import (
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// TestUseTask: the decision whether a call goes out as an MCP task, for
// every taskSupport × action task: × server useTasks.
func TestUseTask(t *testing.T) {
	const (
		req = transport.TaskSupportRequired
		opt = transport.TaskSupportOptional
		no  = transport.TaskSupportForbidden
	)
	tests := []struct {
		support    transport.TaskSupport
		actionTask bool
		policy     string
		use        bool
		refuse     bool
	}{
		{req, false, spec.UseTasksOptional, true, false},
		{req, true, spec.UseTasksOptional, true, false},
		{req, false, spec.UseTasksAlways, true, false},
		{req, false, spec.UseTasksNever, false, true},
		{req, true, spec.UseTasksNever, false, true},
		{opt, false, spec.UseTasksOptional, false, false},
		{opt, true, spec.UseTasksOptional, true, false},
		{opt, false, spec.UseTasksAlways, true, false},
		{opt, true, spec.UseTasksNever, false, false},
		{no, true, spec.UseTasksOptional, false, false},
		{no, true, spec.UseTasksAlways, false, false},
		{no, false, spec.UseTasksNever, false, false},
		{"", true, spec.UseTasksAlways, false, false},
	}
	for _, tc := range tests {
		use, refuse := useTask(tc.support, tc.actionTask, tc.policy)
		if use != tc.use || (refuse != "") != tc.refuse {
			t.Errorf("useTask(%q, %v, %q) = %v, %q; want %v, refuse %v", tc.support, tc.actionTask, tc.policy, use, refuse, tc.use, tc.refuse)
		}
	}
}
