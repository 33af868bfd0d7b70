package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a transport failure; see the package documentation for
// which kinds are ambiguous, possibly executed or definitive.
type Kind string

// The kinds of failure reported in [Error.Kind].
const (
	KindSessionExpired   Kind = "session_expired"    // 404 on a request that carried a session id
	KindTimeout          Kind = "timeout"            // Config.Timeout or Config.MaxDuration elapsed
	KindTransportLoss    Kind = "transport_loss"     // connection or stream lost (or the sink failed)
	KindMalformed        Kind = "malformed"          // the peer sent something that is not valid MCP
	KindCancelled        Kind = "cancelled"          // the caller's context was cancelled
	KindUnauthorized     Kind = "unauthorized"       // 401 after one credential refresh, or no credential
	KindHTTPStatus       Kind = "http_status"        // any other non-2xx status (including 3xx)
	KindRemoteError      Kind = "remote_error"       // a JSON-RPC error response
	KindVersionMismatch  Kind = "version_mismatch"   // the server negotiated another protocol version
	KindPolicyDenied     Kind = "policy_denied"      // network or secret policy refused the request
	KindToolError        Kind = "tool_error"         // unused by transport: isError results are returned in CallResult
	KindInvalidArguments Kind = "invalid_arguments"  // arguments violate the tool's inputSchema
	KindInvalidOutput    Kind = "invalid_output"     // structuredContent violates the tool's outputSchema
	KindUnsupported      Kind = "unsupported"        // the server lacks something agentctl requires
	KindSchemaTooComplex Kind = "schema_too_complex" // a tool schema exceeds the compile or validation budget (MaxSchemaBytes, MaxSchemaNodes, MaxValidationSteps)
)

// Error is every failure this package reports. The caller (the call state
// machine) decides what to do with it; transport never retries on its own,
// except the single credential refresh on 401 and stream resumption, neither
// of which resends a request that may have executed twice.
type Error struct {
	Op      string // "initialize", "notifications/initialized", "tools/list", "tools/call", "policy", ...
	Kind    Kind
	Status  int    // HTTP status when relevant
	Code    int    // JSON-RPC error code for KindRemoteError
	Message string // remote message or detail (redacted)
	Err     error
	// Sent reports whether any byte of the request may have reached the
	// server. A failure before sending is never ambiguous: nothing executed.
	Sent bool
	// Accepted reports that the server had answered the request with 2xx
	// before the failure (e.g. a 401 on the GET resuming its stream): it may
	// be executing whatever the Kind, so MayHaveExecuted is true.
	Accepted bool
	// Data is the JSON-RPC error's data member as received (redacted), for
	// KindRemoteError; remote content, never printed by Error. It carries,
	// e.g., the URLs of a -32042 (see URLElicitationHosts).
	Data json.RawMessage
	// Supported lists the protocol versions the server offers, for
	// KindVersionMismatch (data.supported of a -32022, or the version an
	// initialize answered); remote text, redacted when printed.
	Supported []string
}

// Error renders the failure as "transport: OP: KIND[ (status N)][ (code N)]: MESSAGE: ERR".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("transport: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(string(e.Kind))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (http %d)", e.Status)
	}
	if e.Kind == KindRemoteError {
		fmt.Fprintf(&b, " (code %d)", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Ambiguous reports whether the request may have executed and a fresh
// session may help: session_expired, timeout, transport_loss and malformed,
// and only when the request was sent.
func (e *Error) Ambiguous() bool {
	if e == nil || !e.Sent {
		return false
	}
	switch e.Kind {
	case KindSessionExpired, KindTimeout, KindTransportLoss, KindMalformed:
		return true
	}
	return false
}

// MayHaveExecuted reports whether the request may have executed: the
// ambiguous kinds, plus a 5xx http_status, a cancellation after send and
// any failure after the server accepted the request.
func (e *Error) MayHaveExecuted() bool {
	if e.Ambiguous() {
		return true
	}
	if e == nil || !e.Sent {
		return false
	}
	if e.Accepted {
		return true
	}
	switch e.Kind {
	case KindHTTPStatus:
		return e.Status >= 500
	case KindCancelled:
		return true
	}
	return false
}

// KindOf returns the Kind of the first *Error in err's chain, or "".
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
