package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// cimdURL is the Client ID Metadata Document URL the suite's authorization
// servers accept as a client id (its CIMD_CLIENT_METADATA_URL): the
// document agentctl would publish.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// secretEnv carries the context's client secret to agentctl by reference.
const secretEnv = "AGENTCTL_CONFORMANCE_CLIENT_SECRET"

// idTokenEnv carries the context's IdP ID token by reference.
const idTokenEnv = "AGENTCTL_CONFORMANCE_ID_TOKEN"

// assertionEnv carries the context's workload identity JWT by reference.
const assertionEnv = "AGENTCTL_CONFORMANCE_WORKLOAD_JWT"

// privateKeyEnv carries the context's private key (PEM) by reference.
const privateKeyEnv = "AGENTCTL_CONFORMANCE_PRIVATE_KEY"

// authCall acts out an auth scenario: one tool call (agentctl lists the
// tools first), authorized through agentctl's OAuth flags mapped from the
// scenario's context, this driver acting as the browser ($BROWSER).
func authCall(a agentctl, u string) error {
	var ctx struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		PrivateKey   string `json:"private_key_pem"`
		SigningAlg   string `json:"signing_algorithm"`
		WorkloadJWT  string `json:"valid_jwt"`
		IDPClientID  string `json:"idp_client_id"`
		IDToken      string `json:"idp_id_token"`
		IDPTokenURL  string `json:"idp_token_endpoint"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &ctx); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	a.env = append(a.env, "BROWSER="+self+" --browse")
	flags := []string{"--oauth", "--oauth-client-metadata-url", cimdURL}
	if ctx.ClientID != "" {
		flags = append(flags, "--oauth-client-id", ctx.ClientID)
	}
	if ctx.ClientSecret != "" {
		a.env = append(a.env, secretEnv+"="+ctx.ClientSecret)
		flags = append(flags, "--oauth-client-secret-env", secretEnv)
	}
	if strings.HasPrefix(os.Getenv("MCP_CONFORMANCE_SCENARIO"), "auth/client-credentials") {
		flags = append(flags, "--oauth-grant", "client_credentials")
	}
	if ctx.WorkloadJWT != "" {
		a.env = append(a.env, assertionEnv+"="+ctx.WorkloadJWT)
		flags = append(flags, "--oauth-grant", "jwt-bearer", "--oauth-assertion-env", assertionEnv)
	}
	if ctx.IDToken != "" {
		a.env = append(a.env, idTokenEnv+"="+ctx.IDToken)
		flags = append(flags, "--oauth-grant", "jwt-bearer", "--oauth-idp-token-endpoint", ctx.IDPTokenURL,
			"--oauth-idp-client-id", ctx.IDPClientID, "--oauth-id-token-env", idTokenEnv)
	}
	if ctx.PrivateKey != "" {
		a.env = append(a.env, privateKeyEnv+"="+ctx.PrivateKey)
		flags = append(flags, "--oauth-private-key-env", privateKeyEnv)
	}
	if ctx.SigningAlg != "" {
		flags = append(flags, "--oauth-private-key-alg", ctx.SigningAlg)
	}
	return a.call(u, "test-tool", `{}`, flags...)
}

// browse is the browser: it GETs the authorization URL and follows its
// redirects to agentctl's loopback callback.
func browse(u string) error {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Errorf("browse: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 400 {
		return errors.New("browse: " + resp.Status)
	}
	return nil
}
