package localenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ImageFile is one file of an image's single layer.
//
// Mode carries os.FileMode bits: the permissions, and os.ModeSetuid, os.ModeSetgid and
// os.ModeSticky. Mode with os.ModeDir makes the file a directory, and Data and Source
// are then unused. A file without Data and Source is empty.
type ImageFile struct {
	// Path is where the file is in the image, such as "/bin/busybox".
	Path string
	// Mode is the file's type and permission bits.
	Mode os.FileMode
	// Data is the file's content.
	Data []byte
	// Source is a file on this host read as the content when Data is nil.
	Source string
	// Link makes the file a symbolic link to Link when set.
	Link string
}

// Image is a single-layer linux/amd64 container image built without a Docker daemon.
type Image struct {
	// Ref is the image's name and tag, such as "berth.local/echo:1".
	Ref          string
	Files        []ImageFile
	Entrypoint   []string
	Cmd          []string
	Env          []string
	WorkingDir   string
	ExposedPorts []int
}

// ImagesEnv names the environment variable holding hack/images.sh's directory.
const ImagesEnv = "BERTH_IMAGES"

// imagePath is the PATH of the images built here.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// busyboxApplets are the busybox commands BusyboxImage links in /bin.
var busyboxApplets = []string{
	"[", "ash", "awk", "base64", "basename", "cat", "chmod", "chown", "cp", "cut", "date",
	"dd", "df", "diff", "dirname", "du", "echo", "env", "expr", "false", "find", "free",
	"grep", "gunzip", "gzip", "head", "hostname", "httpd", "id", "ip", "kill", "less", "ln",
	"ls", "md5sum", "mkdir", "mktemp", "more", "mount", "mv", "nc", "netstat", "nologin",
	"nslookup", "ping", "printf", "ps", "pwd", "readlink", "realpath", "rm", "rmdir", "sed",
	"seq", "sh", "sha256sum", "sleep", "sort", "stat", "sync", "tail", "tar", "tee", "test",
	"timeout", "top", "touch", "tr", "true", "umount", "uname", "uniq", "vi", "wc", "wget",
	"which", "whoami", "xargs", "yes",
}

// BusyboxImage is an image of Debian's busybox-static, whose binary is in dir
// (hack/images.sh's directory). It holds /bin/busybox, a symbolic link in /bin for each
// common applet (sh, cat, ls, wget, ps, ...), and /usr/bin/env. Its command is /bin/sh.
func BusyboxImage(ref, dir string) Image {
	files := []ImageFile{
		{Path: "/bin/busybox", Mode: 0o755, Source: filepath.Join(dir, "busybox")},
		{Path: "/usr/bin/env", Link: "/bin/busybox"},
	}
	for _, a := range busyboxApplets {
		files = append(files, ImageFile{Path: "/bin/" + a, Link: "busybox"})
	}
	return Image{Ref: ref, Files: files, Cmd: []string{"/bin/sh"}, Env: []string{imagePath}, WorkingDir: "/"}
}

// EchoImage is the echo program (examples/images/echo) over BusyboxImage, so a shell in
// it works. Its entrypoint is /echo, which serves port 8080. It has /etc/passwd and
// /etc/group with root and nobody, and an empty /tmp with mode 1777. dir is
// hack/images.sh's directory.
func EchoImage(ref, dir string) Image {
	img := BusyboxImage(ref, dir)
	img.Files = append(img.Files,
		ImageFile{Path: "/echo", Mode: 0o755, Source: filepath.Join(dir, "echo")},
		ImageFile{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/nologin\n")},
		ImageFile{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\n")},
		ImageFile{Path: "/root", Mode: fs.ModeDir | 0o700},
		ImageFile{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	)
	img.Entrypoint = []string{"/echo"}
	img.Cmd = nil
	img.ExposedPorts = []int{8080}
	return img
}

// PauseImage is the pod sandbox image: only /bin/busybox, whose sleep never ends. dir is
// hack/images.sh's directory.
//
// Busybox's sleep does not handle SIGTERM, and as a namespace's first process it ignores
// the signal; the sandbox ends with SIGKILL.
func PauseImage(ref, dir string) Image {
	return Image{
		Ref:        ref,
		Files:      []ImageFile{{Path: "/bin/busybox", Mode: 0o755, Source: filepath.Join(dir, "busybox")}},
		Entrypoint: []string{"/bin/busybox", "sleep", "2147483647"},
		Env:        []string{imagePath},
		WorkingDir: "/",
	}
}

// BerthImage is an image of berth itself: the binary at /usr/local/bin/berth (its
// entrypoint), /etc/passwd and /etc/group naming root and nonroot (UID and GID 65532,
// which the chart runs as), and an empty /tmp with mode 1777; nothing else, as a
// distroless static image. The binary must be static (CheckStatic).
func BerthImage(ref, binary string) Image {
	return Image{
		Ref: ref,
		Files: []ImageFile{
			{Path: "/usr/local/bin/berth", Mode: 0o755, Source: binary},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
				"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{"/usr/local/bin/berth"},
		Env:        []string{imagePath},
		WorkingDir: "/",
	}
}

// CheckStatic refuses a binary an image without a C library cannot run: one that is not
// a Linux amd64 ELF executable, or that asks for a dynamic loader.
func CheckStatic(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: not an executable this machine runs: %w", binary, err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: a %s %s file, not a linux/amd64 executable", binary, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it needs a C library the image does not have): build it with CGO_ENABLED=0", binary)
		}
	}
	return nil
}

// FindImages returns the directory with the programs of the workload images:
// $BERTH_IMAGES when set, otherwise the cache directory hack/images.sh reports (without
// building anything). A directory without echo and busybox is an ErrMissingDependency.
func FindImages(ctx context.Context) (string, error) {
	return findBuilt(ctx, ImagesEnv, "images.sh", "echo", "busybox")
}

// BuildImages builds (or reuses) the programs of the workload images with
// hack/images.sh, writing its progress to progress, and returns their directory as
// FindImages finds it (so $BERTH_IMAGES must be unset).
func BuildImages(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "images.sh", "the workload images' programs", progress); err != nil {
		return "", err
	}
	return FindImages(ctx)
}

// The grammar of a Docker reference without a digest (distribution/reference).
var refPattern = func() *regexp.Regexp {
	const (
		domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain          = domainComponent + `(?:\.` + domainComponent + `)*(?::[0-9]+)?`
		pathComponent   = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
		name            = `(?:` + domain + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
		tag             = `[\w][\w.-]{0,127}`
	)
	return regexp.MustCompile(`^` + name + `:` + tag + `$`)
}()

// layerEntry is one entry of the layer tar: a file of Image.Files or a parent directory.
type layerEntry struct {
	name string // clean, relative to the root
	file ImageFile
}

// WriteDockerArchive writes img as a docker-archive tarball, the format `docker save`
// writes and `ctr images import` reads. The tarball holds manifest.json, the config
// named <digest>.json, and the layer as an uncompressed tar named <digest>/layer.tar.
//
// The output depends only on img and the content of its Source files. Every entry has
// modification time 0 and owner 0:0, the layer's entries are sorted by path, and each
// parent directory a file needs is one entry with mode 0755.
func (img Image) WriteDockerArchive(w io.Writer) error {
	layer, config, err := img.blobs()
	if err != nil {
		return err
	}
	layerHex, configHex := sha256Hex(layer), sha256Hex(config)
	manifest, err := json.Marshal([]dockerManifest{{
		Config:   configHex + ".json",
		RepoTags: []string{img.Ref},
		Layers:   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return fmt.Errorf("image %s: manifest: %w", img.Ref, err)
	}

	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{layerHex + "/layer.tar", layer},
		{configHex + ".json", config},
		{"manifest.json", manifest},
	} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("image %s: write %s: %w", img.Ref, f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("image %s: write %s: %w", img.Ref, f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image %s: close archive: %w", img.Ref, err)
	}
	return nil
}

// blobs are the image's layer (an uncompressed tar) and its config (JSON).
func (img Image) blobs() (layer, config []byte, err error) {
	entries, err := img.layerEntries()
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := writeLayer(&buf, entries); err != nil {
		return nil, nil, fmt.Errorf("image %s: layer: %w", img.Ref, err)
	}
	config, err = json.Marshal(img.config("sha256:" + sha256Hex(buf.Bytes())))
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: config: %w", img.Ref, err)
	}
	return buf.Bytes(), config, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// dockerManifest is one image of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is the image configuration of the Docker image specification (v1.2),
// which is also OCI's.
type imageConfig struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type containerConfig struct {
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
}

func (img Image) config(diffID string) imageConfig {
	c := imageConfig{
		Created:      time.Unix(0, 0).UTC().Format(time.RFC3339),
		Architecture: "amd64",
		OS:           "linux",
		Config: containerConfig{
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			Env:        img.Env,
			WorkingDir: img.WorkingDir,
		},
	}
	for _, p := range img.ExposedPorts {
		if c.Config.ExposedPorts == nil {
			c.Config.ExposedPorts = map[string]struct{}{}
		}
		c.Config.ExposedPorts[strconv.Itoa(p)+"/tcp"] = struct{}{}
	}
	c.RootFS.Type = "layers"
	c.RootFS.DiffIDs = []string{diffID}
	return c
}

// layerEntries validates img and returns the entries of its layer, sorted by name: its
// files and the parent directories they need.
func (img Image) layerEntries() ([]layerEntry, error) {
	if !refPattern.MatchString(img.Ref) || len(img.Ref) > 255 {
		return nil, fmt.Errorf("image Ref %q: want name:tag, such as berth.local/echo:1", img.Ref)
	}
	for i, p := range img.ExposedPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("image %s: ExposedPorts[%d] %d: not a port", img.Ref, i, p)
		}
	}
	const modeBits = fs.ModePerm | fs.ModeDir | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	byName := make(map[string]layerEntry, len(img.Files))
	names := make([]string, 0, len(img.Files))
	for i, f := range img.Files {
		field := fmt.Sprintf("image %s: Files[%d]", img.Ref, i)
		switch {
		case f.Path == "":
			return nil, fmt.Errorf("%s.Path is empty", field)
		case slices.Contains(strings.Split(f.Path, "/"), ".."):
			return nil, fmt.Errorf("%s.Path %q: a \"..\" element is not allowed", field, f.Path)
		case f.Mode&^modeBits != 0:
			return nil, fmt.Errorf("%s.Mode %v: only permissions, setuid, setgid, sticky and directory", field, f.Mode)
		case f.Link != "" && (f.Mode.IsDir() || f.Data != nil || f.Source != ""):
			return nil, fmt.Errorf("%s.Link %q: a link has no Mode directory, Data or Source", field, f.Link)
		}
		name := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if name == "" {
			return nil, fmt.Errorf("%s.Path %q is the root", field, f.Path)
		}
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("%s.Path %q: another file has the same path", field, f.Path)
		}
		byName[name] = layerEntry{name: name, file: f}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			e, ok := byName[dir]
			if !ok {
				byName[dir] = layerEntry{name: dir, file: ImageFile{Path: "/" + dir, Mode: fs.ModeDir | 0o755}}
			} else if !e.file.Mode.IsDir() || e.file.Link != "" {
				return nil, fmt.Errorf("image %s: file %q is not a directory but holds %q", img.Ref, e.file.Path, "/"+name)
			}
		}
	}
	entries := make([]layerEntry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b layerEntry) int { return strings.Compare(a.name, b.name) })
	return entries, nil
}

// writeLayer writes entries as a tar to w.
func writeLayer(w io.Writer, entries []layerEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		f := e.file
		hdr := &tar.Header{Name: e.name, Mode: tarMode(f.Mode), ModTime: time.Unix(0, 0)}
		var data []byte
		switch {
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		case f.Mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		default:
			data = f.Data
			if data == nil && f.Source != "" {
				var err error
				if data, err = os.ReadFile(f.Source); err != nil {
					return fmt.Errorf("read %s for %s: %w", f.Source, f.Path, err)
				}
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return tw.Close()
}

// tarMode converts os.FileMode permission bits to a tar header's mode.
func tarMode(m os.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
