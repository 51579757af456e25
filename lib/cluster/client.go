package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Defaults applied when an Options duration is zero.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Key names relative to the cluster prefix, for WaitChange and logs.
const (
	KeyLock     = "lock"     // mutex prefix (the Mutex adds "/")
	KeySlots    = "slots/"   // prefix of P/slots/<node>
	KeyMembers  = "members/" // prefix of P/members/<node>
	KeyAlive    = "alive/"   // prefix of P/alive/<node>
	KeyHistory  = "history/" // prefix of P/history/<id>
	KeyPause    = "pause"    // P/pause
	KeySettings = "settings" // P/settings
	rootPrefix  = "/clusterrebootd/"
)

// Options configures Dial. Only Endpoints and Cluster are required.
type Options struct {
	Endpoints      []string
	DialTimeout    time.Duration // bounds connecting and the probe in Dial; 0 → DefaultDialTimeout
	RequestTimeout time.Duration // bounds every unary request; 0 → DefaultRequestTimeout

	Username     string // etcd auth user; requires PasswordFile
	PasswordFile string // file holding the password (a trailing newline is dropped)

	CAFile, CertFile, KeyFile string // TLS: CA bundle, client certificate and key
	ServerName                string // TLS server name override

	Cluster string // lock group: keys live under /clusterrebootd/<Cluster>
	Logger  *slog.Logger
}

// Client talks to etcd on behalf of one cluster (key prefix).
type Client struct {
	cli        *clientv3.Client
	prefix     string // P, without trailing slash
	reqTimeout time.Duration
	log        *slog.Logger
}

// Dial connects to etcd and probes it once (a linearizable, count-only Get
// bounded by DialTimeout), so an unreachable cluster, a cluster without
// leader or bad credentials are reported here: ErrUnavailable or ErrAuth.
// The error says what to fix (a refused connection, an unknown server CA, a
// rejected or expired client certificate, the etcd user lacking permission
// on the prefix); finding that out takes at most another DialTimeout.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("cluster: no etcd endpoints")
	}
	if o.Cluster == "" || strings.ContainsAny(o.Cluster, "/\x00") {
		return nil, fmt.Errorf("cluster: invalid cluster name %q", o.Cluster)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dialTimeout := o.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	reqTimeout := o.RequestTimeout
	if reqTimeout <= 0 {
		reqTimeout = DefaultRequestTimeout
	}
	cfg := clientv3.Config{
		Endpoints:            o.Endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: dialTimeout,
		Logger:               newZapLogger(log),
		Context:              context.WithoutCancel(ctx),
		// gRPC's default reconnect backoff grows to 120 s: after an etcd
		// outage a long-lived holder would stay disconnected for minutes.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2,
				MaxDelay: max(reqTimeout/2, 500*time.Millisecond),
			},
			MinConnectTimeout: dialTimeout,
		})},
	}
	if o.Username != "" || o.PasswordFile != "" {
		if o.Username == "" || o.PasswordFile == "" {
			return nil, errors.New("cluster: etcd username and password_file go together")
		}
		pw, err := readPassword(o.PasswordFile)
		if err != nil {
			return nil, err
		}
		cfg.Username, cfg.Password = o.Username, pw
	}
	tlsCfg, err := tlsConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.TLS = tlsCfg

	// clientv3.New fetches the auth token (bounded by DialTimeout) when a
	// user is set; without one it does not touch the network.
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, dialError(ctx, o, tlsCfg, dialTimeout, err)
	}
	c := &Client{cli: cli, prefix: rootPrefix + o.Cluster, reqTimeout: reqTimeout, log: log}
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, c.key(KeySettings), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no endpoint answered within %s: %w", dialTimeout, err)
		}
		return nil, dialError(ctx, o, tlsCfg, dialTimeout, err)
	}
	log.Debug("etcd connected", "endpoints", o.Endpoints, "prefix", c.prefix)
	return c, nil
}

// dialError classifies a failed dial and says what to fix: an access error
// names the etcd identity and the prefix it needs; an unavailable etcd is
// probed once more (TCP and TLS, bounded by dialTimeout) because gRPC keeps
// the cause (refused connection, unknown CA, rejected client certificate)
// to itself and reports only the expired deadline.
func dialError(ctx context.Context, o Options, tlsCfg *tls.Config, dialTimeout time.Duration, err error) error {
	op := "dial " + strings.Join(o.Endpoints, ",")
	cerr := classify(ctx, op, err)
	switch {
	case errors.Is(cerr, ErrAuth):
		if hint := accessHint(o, tlsCfg, err); hint != "" {
			return fmt.Errorf("%w: %s", cerr, hint)
		}
	case errors.Is(cerr, ErrUnavailable) && ctx.Err() == nil:
		if why := diagnose(ctx, o.Endpoints, tlsCfg, dialTimeout); why != "" {
			return fmt.Errorf("%w: %s", cerr, why)
		}
	}
	return cerr
}

// Close closes the connection. Sessions of this client stop being kept alive.
func (c *Client) Close() error { return c.cli.Close() }

// Prefix returns the cluster prefix P (no trailing slash).
func (c *Client) Prefix() string { return c.prefix }

// key joins the prefix and a relative key.
func (c *Client) key(rel string) string { return c.prefix + "/" + rel }

// request derives the bounded context of one unary request.
func (c *Client) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.reqTimeout)
}

func readPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cluster: password file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("cluster: password file %s: %w", path, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("cluster: password file %s is empty", path)
	}
	return pw, nil
}

// tlsConfig builds the client TLS configuration, nil when no TLS option is set.
func tlsConfig(o Options) (*tls.Config, error) {
	if o.CAFile == "" && o.CertFile == "" && o.KeyFile == "" && o.ServerName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: tls ca_file %s: no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("cluster: tls cert_file and key_file go together")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
