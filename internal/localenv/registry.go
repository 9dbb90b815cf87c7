package localenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// This file: an OCI registry (distribution's, built by hack/registry.sh) on 127.0.0.1,
// and a push of an Image to it without a Docker daemon.

// RegistryDirEnv names the environment variable holding hack/registry.sh's directory.
const RegistryDirEnv = "BERTH_REGISTRY"

// FindRegistry returns the directory holding the registry's binary: $BERTH_REGISTRY
// when set, otherwise the cache directory hack/registry.sh reports (building nothing).
func FindRegistry(ctx context.Context) (string, error) {
	return findBuilt(ctx, RegistryDirEnv, "registry.sh", "registry")
}

// BuildRegistry runs hack/registry.sh, its progress to progress, and returns the
// directory FindRegistry then finds.
func BuildRegistry(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "registry.sh", "the image registry", progress); err != nil {
		return "", err
	}
	return FindRegistry(ctx)
}

// RegistryOptions configures StartRegistry.
type RegistryOptions struct {
	// Dir holds the registry's configuration, its storage and its log (required).
	Dir string
	// BinDir is hack/registry.sh's directory; empty: FindRegistry.
	BinDir string
	// Port, when set, is its loopback port (a restarted registry keeps its address);
	// 0: a free one.
	Port int
	// StartTimeout bounds the start-up (default 1 minute).
	StartTimeout time.Duration
	// Users, when set, are the only accounts that may push and pull (user → password,
	// HTTP basic authentication); empty: anyone may.
	Users map[string]string
	// Restart says how the process is restarted, with the same arguments, when it
	// exits by itself (RestartPolicy's defaults; Max < 0: never, Failed is closed).
	Restart RestartPolicy
	// Log receives its exits and restarts (nil: discarded).
	Log *slog.Logger
}

// Registry is a running OCI registry on a free loopback port, serving plain HTTP.
type Registry struct {
	// Addr is its host:port (127.0.0.1:PORT), the first part of its images' names.
	Addr string
	// Its process: Failed, Err, Stop (which leaves its storage), LogPath, Restarts.
	*Service
}

// StartRegistry starts the registry and returns once it answers. The caller must call
// Stop.
func StartRegistry(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	if opts.Dir == "" {
		return nil, errors.New("registry: Dir is required")
	}
	ctx, cancel, err := startup(ctx, opts.StartTimeout, &opts.BinDir, FindRegistry)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := os.MkdirAll(filepath.Join(opts.Dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	port := opts.Port
	if port == 0 {
		ports, err := FreePorts(ctx, 1)
		if err != nil {
			return nil, err
		}
		port = ports[0]
	}
	r := &Registry{Addr: hostPort(port)}
	auth := ""
	if len(opts.Users) > 0 {
		var lines []string
		for user, pass := range opts.Users {
			hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
			if err != nil {
				return nil, fmt.Errorf("registry: password of %s: %w", user, err)
			}
			lines = append(lines, user+":"+string(hash))
		}
		slices.Sort(lines)
		htpasswd := filepath.Join(opts.Dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: berth\n    path: %s\n", htpasswd)
	}
	config := filepath.Join(opts.Dir, "config.yml")
	body := fmt.Sprintf(`version: 0.1
log:
  level: warn
  formatter: text
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  draintimeout: 1s
%s`, filepath.Join(opts.Dir, "data"), r.Addr, auth)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	// No telemetry: nothing leaves this machine.
	r.Service, err = StartService(ServiceOptions{Name: "registry", Bin: filepath.Join(opts.BinDir, "registry"), Args: []string{"serve", config},
		Env: []string{"OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none"}, LogDir: opts.Dir, Restart: opts.Restart, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	err = waitFor(ctx, "the registry", 50*time.Millisecond, r.exited, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/v2/", http.NoBody)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		// 401: it answers, and asks who is asking.
		return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized, nil
	})
	if err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// OCI media types of what Push uploads.
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Push uploads img to the registry at addr (host:port, plain HTTP) as repo:tag, with
// user and password when user is set, and returns the image's name there
// (addr/repo:tag). It speaks the registry API (OCI distribution): the layer and the
// config as blobs, then an OCI manifest naming them.
func Push(ctx context.Context, addr, repo, tag, user, password string, img Image) (string, error) {
	layer, config, err := img.blobs()
	if err != nil {
		return "", err
	}
	p := pusher{base: "http://" + addr + "/v2/" + repo, user: user, password: password,
		client: &http.Client{Timeout: time.Minute}}
	defer p.client.CloseIdleConnections()
	desc := func(media string, b []byte) map[string]any {
		return map[string]any{"mediaType": media, "size": len(b), "digest": "sha256:" + sha256Hex(b)}
	}
	for _, b := range [][]byte{layer, config} {
		if err := p.blob(ctx, b); err != nil {
			return "", fmt.Errorf("push %s/%s:%s: %w", addr, repo, tag, err)
		}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": desc(mediaConfig, config), "layers": []any{desc(mediaLayer, layer)},
	})
	if err != nil {
		return "", err
	}
	if _, err := p.do(ctx, http.MethodPut, p.base+"/manifests/"+url.PathEscape(tag), mediaManifest, manifest, http.StatusCreated); err != nil {
		return "", fmt.Errorf("push %s/%s:%s: manifest: %w", addr, repo, tag, err)
	}
	return addr + "/" + repo + ":" + tag, nil
}

// pusher uploads to one repository of a registry.
type pusher struct {
	base, user, password string
	client               *http.Client
}

// blob uploads b unless the registry has it: a POST opens an upload, a PUT with the
// digest completes it.
func (p pusher) blob(ctx context.Context, b []byte) error {
	digest := "sha256:" + sha256Hex(b)
	if _, err := p.do(ctx, http.MethodHead, p.base+"/blobs/"+digest, "", nil, http.StatusOK); err == nil {
		return nil
	}
	hdr, err := p.do(ctx, http.MethodPost, p.base+"/blobs/uploads/", "", nil, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("blob %s: %w", digest, err)
	}
	loc, err := url.Parse(hdr.Get("Location"))
	if err != nil {
		return fmt.Errorf("blob %s: upload location: %w", digest, err)
	}
	base, _ := url.Parse(p.base)
	loc = base.ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	if _, err := p.do(ctx, http.MethodPut, loc.String(), "application/octet-stream", b, http.StatusCreated); err != nil {
		return fmt.Errorf("blob %s: %w", digest, err)
	}
	return nil
}

// do sends one request, wants the status want, and returns the answer's header.
func (p pusher) do(ctx context.Context, method, target, contentType string, body []byte, want int) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if p.user != "" {
		req.SetBasicAuth(p.user, p.password)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s: %s", method, req.URL.Path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp.Header, nil
}
