package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/sdl"
)

const corpus = "../../internal/sdl/testdata/corpus"

// runIO runs berth with stdin and returns what it wrote to stdout and stderr.
func runIO(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand(slog.New(slog.DiscardHandler))
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func expected(t *testing.T, name string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpus, name, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sameJSONValue(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

func TestSDLCommandsPrintAkashsResults(t *testing.T) {
	const name = "cs-v2.1-simple-with-ip"
	file := filepath.Join(corpus, name, "input.yaml")
	want := expected(t, name)
	for _, part := range []string{"groups", "manifest"} {
		out, stderr, err := runIO(t, "", "sdl", part, file)
		if err != nil || stderr != "" {
			t.Fatalf("sdl %s: %v %s", part, err, stderr)
		}
		if !sameJSONValue(t, []byte(out), want[part]) {
			t.Errorf("sdl %s output differs from Akash's:\n%s", part, out)
		}
	}
	out, _, err := runIO(t, "", "sdl", "version", file)
	var version string
	if err != nil || json.Unmarshal(want["manifestVersion"], &version) != nil || out != version+"\n" {
		t.Errorf("sdl version printed %q (%v), want %q and nothing else", out, err, version)
	}
	out, _, err = runIO(t, "", "sdl", "validate", file)
	if err != nil || !strings.Contains(out, "valid SDL 2.1: 1 group(s), 1 service(s), version "+version) {
		t.Errorf("sdl validate: %q %v", out, err)
	}
}

func TestSDLReadsStandardInput(t *testing.T) {
	in, err := os.ReadFile(filepath.Join(corpus, "cs-simple", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runIO(t, string(in), "sdl", "version", "-")
	var want string
	if jerr := json.Unmarshal(expected(t, "cs-simple")["manifestVersion"], &want); jerr != nil || err != nil || out != want+"\n" {
		t.Errorf("version from stdin %q (%v), want %q", out, err, want)
	}
	_, _, err = runIO(t, strings.Repeat("#", sdl.MaxInputBytes+10), "sdl", "validate", "-")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "<stdin>: the file is 1048577 bytes; the limit is 1048576 (1 MiB)") {
		t.Errorf("oversized stdin: %v", err)
	}
}

func TestSDLExitCodesAndMessages(t *testing.T) {
	tests := []struct {
		args        []string
		code        int
		err         string // in the returned error
		stderr      string // in what was written to stderr (warnings)
		emptyStdout bool
	}{
		{args: []string{"sdl", "validate", filepath.Join(corpus, "ct-invalid_port-too-high", "input.yaml")}, code: 1,
			err: "services.web.expose[0].port (line 8): port 99999 is outside 1–65535", emptyStdout: true},
		{args: []string{"sdl", "manifest", filepath.Join(corpus, "aa-bancor_deploy", "input.yaml")}, code: 1,
			err: `profiles.compute.bancor.resources.memory.size (line 25): "2gi" is not a size`, emptyStdout: true},
		{args: []string{"sdl", "validate", filepath.Join(corpus, "aa-matomo_deploy", "input.yaml")}, code: 0,
			stderr: `warning: services.db.expose[0].to[0].servcie (line 16): unknown key "servcie" (did you mean "service"?)`},
		{args: []string{"sdl", "validate", "--strict", filepath.Join(corpus, "aa-matomo_deploy", "input.yaml")}, code: 1,
			err: "--strict makes this warning an error: unknown key \"servcie\"", stderr: "warning: services.matomo.depends-on", emptyStdout: true},
		{args: []string{"sdl", "validate"}, code: 2, err: "expected 1 argument(s), got 0"},
		{args: []string{"sdl", "version", "a", "b"}, code: 2, err: "expected 1 argument(s), got 2"},
		{args: []string{"sdl", "groups", "--bogus", "x"}, code: 2, err: "unknown flag: --bogus"},
		{args: []string{"sdl", "validate", "/no/such/file.yaml"}, code: 1, err: "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			out, stderr, err := runIO(t, "", tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit code %d (%v), want %d", got, err, tt.code)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want it to contain %q", err, tt.err)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.stderr)
			}
			if tt.emptyStdout && out != "" {
				t.Errorf("stdout %q, want nothing on failure", out)
			}
		})
	}
}
