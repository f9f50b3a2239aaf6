package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/gateway"
)

// The keys actions against a running gateway (--server): they call the
// admin key API with an admin key read from an environment variable, so
// that it shows in no process list or shell history, and is never printed.

type serverFlags struct {
	url    *string
	keyEnv *string
}

func addServerFlags(fs *flag.FlagSet) serverFlags {
	return serverFlags{
		url:    fs.String("server", "", "act on the running gateway at `URL` through its admin API instead of on the store"),
		keyEnv: fs.String("key-env", gateway.AdminKeyEnv, "with --server, read the admin key from the environment variable `NAME`"),
	}
}

// client is the admin client --server and --key-env name.
func (f serverFlags) client(env *Env) (*gatewayClient, error) {
	u, err := url.Parse(*f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server: want http(s)://host[:port], got %q", *f.url)
	}
	key := env.Getenv(*f.keyEnv)
	if key == "" {
		return nil, fmt.Errorf("--server needs an admin key in the environment variable %s (or name another with --key-env)", *f.keyEnv)
	}
	return newGatewayClient(strings.TrimSuffix(*f.url, "/"), key, 30*time.Second), nil
}

// do sends a request to the admin API and decodes a 2xx answer into out;
// any other answer is an error with the server's message.
func (c *gatewayClient) do(ctx context.Context, method, path string, body, out any) error {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	a, err := c.send(ctx, method, path, b)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if a.code/100 != 2 {
		if msg := a.errorMessage(); msg != "" {
			return fmt.Errorf("%s %s: %d: %s", method, path, a.code, msg)
		}
		return fmt.Errorf("%s %s: %s", method, path, a.status)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the admin API's: %w", method, path, err)
	}
	return nil
}

func remoteCreate(ctx context.Context, env *Env, c *gatewayClient, tenant, user, name string, admin bool) error {
	var k auth.KeyView
	body := map[string]any{"tenant": tenant, "user": user, "name": name, "admin": admin}
	if err := c.do(ctx, "POST", "/admin/v1/keys", body, &k); err != nil {
		return err
	}
	printCreated(env, k, "")
	return nil
}

// printCreated says on stderr what was created and prints the key, shown
// once, alone on stdout, for scripts to capture.
func printCreated(env *Env, k auth.KeyView, note string) {
	kind := "key"
	if k.Admin {
		kind = "admin key"
	}
	fmt.Fprintf(env.Stderr, "created %s %s (prefix %s) for tenant %s, user %s%s; it is shown once:\n", kind, k.ID, k.Prefix, k.Tenant, k.User, note)
	fmt.Fprintln(env.Stdout, k.Key)
}

func remoteList(ctx context.Context, env *Env, c *gatewayClient, tenant string) error {
	var list struct {
		Data []auth.KeyView `json:"data"`
	}
	if err := c.do(ctx, "GET", "/admin/v1/keys?tenant="+url.QueryEscape(tenant), nil, &list); err != nil {
		return err
	}
	printKeys(env.Stdout, list.Data)
	return nil
}

// printKeys prints keys as a table.
func printKeys(w io.Writer, keys []auth.KeyView) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "ID\tPREFIX\tTENANT\tUSER\tNAME\tADMIN\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", k.ID, k.Prefix, k.Tenant, k.User, k.Name, k.Admin, k.CreatedAt.Format(time.RFC3339), revoked)
	}
}

func remoteRevoke(ctx context.Context, env *Env, c *gatewayClient, id string) error {
	if err := c.do(ctx, "POST", "/admin/v1/keys/"+url.PathEscape(id)+"/revoke", nil, nil); err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	fmt.Fprintf(env.Stderr, "revoked %s\n", id)
	return nil
}

func remoteRotate(ctx context.Context, env *Env, c *gatewayClient, id string, grace time.Duration) error {
	var rot struct {
		Key       auth.KeyView `json:"key"`
		RevokedAt time.Time    `json:"revoked_at"`
	}
	path := "/admin/v1/keys/" + url.PathEscape(id) + "/rotate"
	if grace > 0 {
		path += "?grace=" + url.QueryEscape(grace.String())
	}
	if err := c.do(ctx, "POST", path, nil, &rot); err != nil {
		return fmt.Errorf("rotate %s: %w", id, err)
	}
	printCreated(env, rot.Key, fmt.Sprintf(", replacing %s (revoked from %s)", id, rot.RevokedAt.Format(time.RFC3339)))
	return nil
}
