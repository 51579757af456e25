package cluster

import (
	"context"
	"time"
)

// SetPause writes P/pause (durable): 1 etcd request. At defaults to now.
func (c *Client) SetPause(ctx context.Context, p Pause) error {
	if p.At.IsZero() {
		p.At = time.Now().UTC()
	}
	if err := p.validate(); err != nil {
		return invalid("pause", err)
	}
	return c.put(ctx, "pause", KeyPause, p)
}

// ClearPause deletes P/pause and reports whether it existed: 1 etcd request.
func (c *Client) ClearPause(ctx context.Context) (existed bool, err error) {
	return c.delete(ctx, "resume", KeyPause)
}

// SetSettings writes P/settings (durable): 1 etcd request.
func (c *Client) SetSettings(ctx context.Context, s Settings) error {
	if err := s.validate(); err != nil {
		return invalid("settings", err)
	}
	return c.put(ctx, "set settings", KeySettings, s)
}

// ClearSettings deletes P/settings: 1 etcd request.
func (c *Client) ClearSettings(ctx context.Context) error {
	_, err := c.delete(ctx, "clear settings", KeySettings)
	return err
}

func (c *Client) put(ctx context.Context, op, rel string, v any) error {
	val, err := encode(v)
	if err != nil {
		return err
	}
	rctx, cancel := c.request(ctx)
	defer cancel()
	_, err = c.cli.Put(rctx, c.key(rel), val)
	return classify(ctx, op, err)
}

func (c *Client) delete(ctx context.Context, op, rel string) (bool, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Delete(rctx, c.key(rel))
	if err != nil {
		return false, classify(ctx, op, err)
	}
	return resp.Deleted > 0, nil
}
