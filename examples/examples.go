// Package examples embeds the example workflows so that `agentctl demo`
// runs from any directory.
package examples

import _ "embed"

// Lookup is examples/lookup.yaml: inputs, dependent tasks, a progress
// reporting tool and an output contract, against the demo server.
//
//go:embed lookup.yaml
var Lookup []byte

// LookupFile is the name Lookup is recorded under.
const LookupFile = "examples/lookup.yaml"

// DemoURL is the server URL the example names; demo substitutes the real one.
const DemoURL = "http://127.0.0.1:8765/mcp"
