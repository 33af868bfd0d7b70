package oauth_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/oauth"
)

// steps records the Observer's steps.
type steps struct {
	mu sync.Mutex
	s  []oauth.Step
}

func (r *steps) AuthStep(_ context.Context, s oauth.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s = append(r.s, s)
}

func (r *steps) kinds() []oauth.StepKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k []oauth.StepKind
	for _, s := range r.s {
		k = append(k, s.Kind)
	}
	return k
}

// connect opens a transport session to url with auth.
func connect(t *testing.T, u string, auth transport.Authorizer) *transport.Session {
	t.Helper()
	c, err := transport.New(transport.Config{URL: u, Authorizer: auth,
		Policy: transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true, NetworkAllowlist: []string{"127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}
