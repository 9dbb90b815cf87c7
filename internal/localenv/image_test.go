package localenv

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readTar returns the entries of the tar in data by name, and their names in order.
func readTar(t *testing.T, data []byte) (map[string]*tar.Header, map[string][]byte, []string) {
	t.Helper()
	headers, contents := map[string]*tar.Header{}, map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, contents, names
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		if _, dup := headers[hdr.Name]; dup {
			t.Errorf("tar holds %s twice", hdr.Name)
		}
		headers[hdr.Name], contents[hdr.Name] = hdr, b
		names = append(names, hdr.Name)
	}
}

func TestWriteDockerArchive(t *testing.T) {
	source := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(source, []byte("#!/bin/sh\necho hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := Image{
		Ref: "berth.local/test:1",
		Files: []ImageFile{
			{Path: "/usr/local/bin/prog", Mode: 0o755, Source: source},
			{Path: "/etc/motd", Mode: 0o644, Data: []byte("hello\n")},
			{Path: "/usr/bin/prog", Link: "/usr/local/bin/prog"},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint:   []string{"/usr/local/bin/prog"},
		Cmd:          []string{"--flag"},
		Env:          []string{"PATH=/bin", "A=b"},
		WorkingDir:   "/work",
		ExposedPorts: []int{8080, 53},
	}
	var archive bytes.Buffer
	if err := img.WriteDockerArchive(&archive); err != nil {
		t.Fatal(err)
	}

	t.Run("deterministic", func(t *testing.T) {
		var again bytes.Buffer
		if err := img.WriteDockerArchive(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(archive.Bytes(), again.Bytes()) {
			t.Error("two writes of the same image differ")
		}
	})

	_, outer, _ := readTar(t, archive.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(outer["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v\n%s", err, outer["manifest.json"])
	}
	if len(manifest) != 1 || len(manifest[0].Layers) != 1 || !slices.Equal(manifest[0].RepoTags, []string{img.Ref}) {
		t.Fatalf("manifest.json = %s, want one image tagged %s with one layer", outer["manifest.json"], img.Ref)
	}
	m := manifest[0]
	layer, ok := outer[m.Layers[0]]
	if !ok {
		t.Fatalf("layer %s of manifest.json not in the archive", m.Layers[0])
	}
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])
	if m.Layers[0] != layerHex+"/layer.tar" {
		t.Errorf("layer named %s, want %s/layer.tar", m.Layers[0], layerHex)
	}
	config, ok := outer[m.Config]
	if !ok {
		t.Fatalf("config %s of manifest.json not in the archive", m.Config)
	}
	configSum := sha256.Sum256(config)
	if want := hex.EncodeToString(configSum[:]) + ".json"; m.Config != want {
		t.Errorf("config named %s, want %s", m.Config, want)
	}

	var cfg struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			Entrypoint, Cmd, Env []string
			WorkingDir           string
			ExposedPorts         map[string]struct{}
		} `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		t.Fatalf("config: %v\n%s", err, config)
	}
	if cfg.Architecture != "amd64" || cfg.OS != "linux" {
		t.Errorf("platform = %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if cfg.RootFS.Type != "layers" || !slices.Equal(cfg.RootFS.DiffIDs, []string{"sha256:" + layerHex}) {
		t.Errorf("rootfs = %+v, want layers [sha256:%s]", cfg.RootFS, layerHex)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, img.Entrypoint) || !slices.Equal(c.Cmd, img.Cmd) || !slices.Equal(c.Env, img.Env) || c.WorkingDir != img.WorkingDir {
		t.Errorf("config = %+v, want the image's entrypoint, cmd, env and working directory", c)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 2 {
		t.Errorf("ExposedPorts = %v, want 53/tcp and 8080/tcp", c.ExposedPorts)
	}

	headers, contents, names := readTar(t, layer)
	wantNames := []string{"etc/", "etc/motd", "tmp/", "usr/", "usr/bin/", "usr/bin/prog", "usr/local/", "usr/local/bin/", "usr/local/bin/prog"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("layer entries = %q, want %q", names, wantNames)
	}
	for _, tt := range []struct {
		name     string
		typeflag byte
		mode     int64
		content  string
		link     string
	}{
		{name: "etc/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "tmp/", typeflag: tar.TypeDir, mode: 0o1777},
		{name: "etc/motd", typeflag: tar.TypeReg, mode: 0o644, content: "hello\n"},
		{name: "usr/local/bin/prog", typeflag: tar.TypeReg, mode: 0o755, content: "#!/bin/sh\necho hi\n"},
		{name: "usr/bin/prog", typeflag: tar.TypeSymlink, mode: 0o777, link: "/usr/local/bin/prog"},
	} {
		hdr, ok := headers[tt.name]
		if !ok {
			t.Errorf("layer lacks %s", tt.name)
			continue
		}
		if hdr.Typeflag != tt.typeflag || hdr.Mode != tt.mode || hdr.Linkname != tt.link || string(contents[tt.name]) != tt.content {
			t.Errorf("%s = type %c mode %o link %q content %q, want type %c mode %o link %q content %q", tt.name,
				hdr.Typeflag, hdr.Mode, hdr.Linkname, contents[tt.name], tt.typeflag, tt.mode, tt.link, tt.content)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d gid %d mtime %v, want 0 0 epoch", tt.name, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
	}
}

func TestWriteDockerArchiveRefuses(t *testing.T) {
	file := func(p string) []ImageFile { return []ImageFile{{Path: p, Mode: 0o644}} }
	tests := []struct {
		name    string
		img     Image
		wantErr string
	}{
		{"empty ref", Image{Files: file("/a")}, "Ref"},
		{"ref without tag", Image{Ref: "berth.local/echo", Files: file("/a")}, "Ref"},
		{"ref with upper case", Image{Ref: "berth.local/Echo:1", Files: file("/a")}, "Ref"},
		{"ref with empty tag", Image{Ref: "echo:", Files: file("/a")}, "Ref"},
		{"ref with digest", Image{Ref: "echo@sha256:abc", Files: file("/a")}, "Ref"},
		{"empty path", Image{Ref: "echo:1", Files: file("")}, "Files[0].Path"},
		{"root path", Image{Ref: "echo:1", Files: file("/")}, "Files[0].Path"},
		{"dot-dot path", Image{Ref: "echo:1", Files: file("/../etc/passwd")}, "Files[0].Path"},
		{"relative dot-dot path", Image{Ref: "echo:1", Files: file("a/../../b")}, "Files[0].Path"},
		{"duplicate path", Image{Ref: "echo:1", Files: append(file("/a/b"), file("a//b")...)}, "Files[1].Path"},
		{"file under a file", Image{Ref: "echo:1", Files: append(file("/a"), file("/a/b")...)}, "not a directory"},
		{"bad mode", Image{Ref: "echo:1", Files: []ImageFile{{Path: "/dev/x", Mode: fs.ModeDevice | 0o600}}}, "Files[0].Mode"},
		{"link with data", Image{Ref: "echo:1", Files: []ImageFile{{Path: "/l", Link: "/a", Data: []byte("x")}}}, "Files[0].Link"},
		{"bad port", Image{Ref: "echo:1", ExposedPorts: []int{0}}, "ExposedPorts[0]"},
		{"missing source", Image{Ref: "echo:1", Files: []ImageFile{{Path: "/a", Source: "/nonexistent/berth-image-test"}}}, "/nonexistent/berth-image-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.img.WriteDockerArchive(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("WriteDockerArchive = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteDockerArchiveAcceptsRefs(t *testing.T) {
	for _, ref := range []string{"echo:1", "berth.local/echo:1", "localhost:5000/a/b-c__d.e:v1.2_3", "registry.k8s.io/pause:3.10"} {
		img := Image{Ref: ref, Files: []ImageFile{{Path: "a", Mode: 0o644}}}
		if err := img.WriteDockerArchive(io.Discard); err != nil {
			t.Errorf("ref %s: %v", ref, err)
		}
	}
}

func TestEchoImage(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"echo", "busybox"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := EchoImage("berth.local/echo:1", dir)
	var archive bytes.Buffer
	if err := img.WriteDockerArchive(&archive); err != nil {
		t.Fatal(err)
	}
	_, outer, _ := readTar(t, archive.Bytes())
	var layer []byte
	for name, b := range outer {
		if strings.HasSuffix(name, "/layer.tar") {
			layer = b
		}
	}
	headers, contents, _ := readTar(t, layer)
	for _, want := range []string{"bin/sh", "bin/cat", "bin/ls", "bin/echo", "bin/sleep", "bin/env", "bin/hostname", "bin/mkdir", "bin/rm", "bin/wget", "bin/id", "bin/ps"} {
		if hdr, ok := headers[want]; !ok || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "busybox" {
			t.Errorf("%s is not a link to busybox", want)
		}
	}
	if string(contents["echo"]) != "echo" || string(contents["bin/busybox"]) != "busybox" {
		t.Error("echo and bin/busybox do not hold the files of dir")
	}
	if hdr := headers["tmp/"]; hdr == nil || hdr.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v, want a directory with mode 1777", hdr)
	}
	if !strings.Contains(string(contents["etc/passwd"]), "nobody:x:65534") || !strings.Contains(string(contents["etc/group"]), "root:x:0:") {
		t.Errorf("passwd %q and group %q lack root and nobody", contents["etc/passwd"], contents["etc/group"])
	}
	if !slices.Equal(img.Entrypoint, []string{"/echo"}) || !slices.Equal(img.ExposedPorts, []int{8080}) {
		t.Errorf("entrypoint %q ports %v, want /echo on 8080", img.Entrypoint, img.ExposedPorts)
	}

	pause := PauseImage("berth.local/pause:1", dir)
	if len(pause.Files) != 1 || pause.Entrypoint[0] != "/bin/busybox" {
		t.Errorf("PauseImage = %+v, want only /bin/busybox as entrypoint", pause)
	}
	if err := pause.WriteDockerArchive(io.Discard); err != nil {
		t.Error(err)
	}
}

// TestCheckStatic: busybox-static is accepted; the system's dynamically linked shell
// and a file that is no executable are refused, saying why.
func TestCheckStatic(t *testing.T) {
	images, err := FindImages(t.Context())
	requireDep(t, err)
	if err := CheckStatic(filepath.Join(images, "busybox")); err != nil {
		t.Errorf("busybox-static refused: %v", err)
	}
	if err := CheckStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("/bin/sh (dynamically linked): err = %v, want CGO_ENABLED=0 advice", err)
	}
	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(text); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("a script: err = %v, want not an executable", err)
	}
	img := BerthImage("127.0.0.1:5000/berth:1", filepath.Join(images, "busybox"))
	if !slices.Equal(img.Entrypoint, []string{"/usr/local/bin/berth"}) || !strings.Contains(string(img.Files[1].Data), "nonroot:x:65532:65532") {
		t.Errorf("BerthImage = %+v, want berth as entrypoint and the nonroot user", img)
	}
	if err := img.WriteDockerArchive(io.Discard); err != nil {
		t.Error(err)
	}
}
