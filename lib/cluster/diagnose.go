package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// postHandshakeWait bounds the read after a completed TLS handshake that
// catches a server's rejection of the client certificate (with TLS 1.3 the
// server's alert arrives after the client's side of the handshake is done).
const postHandshakeWait = time.Second

// diagnose explains why no endpoint answered the dial probe: gRPC reports
// only "context deadline exceeded" and keeps the connection error to itself.
// It connects to each endpoint once more (TCP, then the TLS handshake when
// cfg is set), bounded by budget in all, and returns the first concrete
// problem with a hint naming the configuration key to look at; "" when every
// endpoint connects fine (then the cause lies beyond: no leader, overload).
func diagnose(ctx context.Context, endpoints []string, cfg *tls.Config, budget time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var found []string
	for _, ep := range endpoints {
		if ctx.Err() != nil {
			break
		}
		if msg := diagnoseEndpoint(ctx, ep, cfg); msg != "" {
			found = append(found, msg)
		}
	}
	if len(found) == 0 {
		return ""
	}
	msg := strings.Join(found, "; ")
	if local := certWindow(cfg, time.Now()); local != "" {
		msg += "; " + local
	}
	return msg
}

// diagnoseEndpoint returns what is wrong with one endpoint, "" when nothing is.
func diagnoseEndpoint(ctx context.Context, ep string, cfg *tls.Config) string {
	host, secure := endpointHost(ep)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Sprintf("%s: %v", host, unwrapOp(err))
	}
	defer conn.Close()
	if !secure || cfg == nil {
		return ""
	}
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(host)
	}
	c.NextProtos = []string{"h2"}
	tc := tls.Client(conn, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Sprintf("%s: TLS handshake: %v%s", host, unwrapOp(err), tlsHint(err, cfg))
	}
	wait := postHandshakeWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = time.Until(dl)
	}
	_ = tc.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err = tc.Read(b[:])
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return "" // the server speaks after the handshake, or waits for us: TLS is fine
	}
	return fmt.Sprintf("%s: after the TLS handshake: %v%s", host, unwrapOp(err), tlsHint(err, cfg))
}

// endpointHost turns "https://h:p", "http://h:p" or "h:p" into "h:p" and
// whether the endpoint uses TLS.
func endpointHost(ep string) (host string, secure bool) {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return ep, true
	}
	return u.Host, u.Scheme != "http" && u.Scheme != "unix"
}

// unwrapOp drops the *net.OpError wrapping of local operations ("connect:
// connection refused" rather than "dial tcp 127.0.0.1:1: connect: ...") but
// keeps "remote error:", which says that the server sent the alert.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		if op.Op == "remote error" {
			return fmt.Errorf("remote error: %w", op.Err)
		}
		return op.Err
	}
	return err
}

// tlsHint names the configuration key behind a TLS failure. Alerts the
// server sent are recognised by crypto/tls's fixed alert texts (the alert
// type itself is not exported).
func tlsHint(err error, cfg *tls.Config) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return " (etcd.tls.ca_file does not hold the CA that signed the etcd server's certificate)"
	case errors.As(err, &host):
		return " (the etcd server's certificate does not name this endpoint: fix etcd.endpoints or set etcd.tls.server_name)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return " (the etcd server's certificate is expired or not yet valid: renew it, or check this node's clock)"
	}
	hasCert := cfg != nil && len(cfg.Certificates) > 0
	msg := err.Error()
	switch {
	case strings.HasSuffix(msg, "tls: expired certificate"):
		return " (the etcd server rejected this node's client certificate etcd.tls.cert_file as expired or not yet valid: renew it, or check this node's clock)"
	case strings.HasSuffix(msg, "tls: bad certificate"), strings.HasSuffix(msg, "tls: unknown certificate authority"):
		return " (the etcd server rejected this node's client certificate etcd.tls.cert_file: it must be signed by a CA in etcd's --trusted-ca-file and be valid now)"
	case strings.HasSuffix(msg, "tls: certificate required") && hasCert:
		return " (etcd.tls.cert_file is not signed by any CA the etcd server trusts (its --trusted-ca-file), so no client certificate was sent)"
	case strings.HasSuffix(msg, "tls: certificate required"):
		return " (the etcd server requires a client certificate: set etcd.tls.cert_file and etcd.tls.key_file)"
	}
	return ""
}

// certWindow reports a client certificate that is outside its validity
// period at now, "" otherwise.
func certWindow(cfg *tls.Config, now time.Time) string {
	if cfg == nil || len(cfg.Certificates) == 0 || cfg.Certificates[0].Leaf == nil {
		return ""
	}
	leaf := cfg.Certificates[0].Leaf
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Sprintf("the client certificate (CN %q) expired at %s", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Sprintf("the client certificate (CN %q) is not valid before %s (check this node's clock)", leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return ""
}

// accessHint explains an access error of the dial probe: who etcd took us
// for and what that identity needs.
func accessHint(o Options, cfg *tls.Config, err error) string {
	who := "the etcd user " + fmt.Sprintf("%q", o.Username)
	if o.Username == "" {
		who = "the client certificate's user"
		if cfg != nil && len(cfg.Certificates) > 0 && cfg.Certificates[0].Leaf != nil {
			who = fmt.Sprintf("the etcd user %q (the client certificate's CN)", cfg.Certificates[0].Leaf.Subject.CommonName)
		}
	}
	prefix := rootPrefix + o.Cluster + "/"
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Sprintf("%s has no readwrite permission on the prefix %s, or no such user exists: grant it the role clusterrebootd-%s (hack/etcd-rbac.sh)", who, prefix, o.Cluster)
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return "check etcd.username and the password in etcd.password_file"
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return "etcd has authentication enabled: set etcd.username and etcd.password_file, or a client certificate whose CN is an etcd user"
	case errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthOldRevision):
		return "the etcd auth token was refused; retry, and check that all etcd members run with the same --auth-token settings"
	}
	return ""
}
