package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

func TestParseShellQuery(t *testing.T) {
	r, err := parseShellQuery(url.Values{"cmd0": {"sh"}, "cmd1": {"-c"}, "cmd2": {"echo hi"}, "tty": {"1"}, "stdin": {"0"}, "service": {"web"}, "podIndex": {"2"}})
	if err != nil || strings.Join(r.Command, " ") != "sh -c echo hi" || !r.TTY || r.Stdin || r.Service != "web" || r.PodIndex != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, q := range []url.Values{
		{"service": {"web"}, "podIndex": {"0"}},
		{"cmd0": {"ls"}, "podIndex": {"0"}},
		{"cmd0": {"ls"}, "service": {"web"}},
		{"cmd0": {"ls"}, "service": {"web"}, "podIndex": {"-1"}},
		{"cmd0": {"ls"}, "service": {"web"}, "podIndex": {"99999999999"}},
		{"cmd0": {strings.Repeat("x", maxShellArgBytes+1)}, "service": {"web"}, "podIndex": {"0"}},
	} {
		if _, err := parseShellQuery(q); err == nil {
			t.Errorf("%v accepted", q)
		}
	}
}

func TestClientFrames(t *testing.T) {
	f, ok, err := parseClientFrame([]byte{frameStdin, 'h', 'i'})
	if err != nil || !ok || string(f.stdin) != "hi" {
		t.Fatalf("stdin: %+v %v %v", f, ok, err)
	}
	f, ok, err = parseClientFrame([]byte{frameResize, 0, 80, 0, 24})
	if err != nil || !ok || f.resize != (deploy.TerminalSize{Width: 80, Height: 24}) {
		t.Fatalf("resize: %+v %v %v", f, ok, err)
	}
	if _, ok, err := parseClientFrame(nil); ok || err != nil {
		t.Fatal("an empty message is ignored")
	}
	for _, bad := range [][]byte{{frameResize, 0, 80}, {frameStdout, 'x'}, {7}} {
		if _, _, err := parseClientFrame(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	out := resultFrame(shellResult{ExitCode: 3})
	var r shellResult
	if out[0] != frameResult || !bytes.HasSuffix(out, []byte("\n")) || json.Unmarshal(out[1:], &r) != nil || r.ExitCode != 3 {
		t.Fatalf("result frame %q", out)
	}
}

// FuzzClientFrame: whatever a client sends is either a frame or an error, never a
// panic, and a resize always carries exactly its two numbers.
func FuzzClientFrame(f *testing.F) {
	for _, seed := range [][]byte{{frameStdin}, {frameStdin, 'l', 's', '\n'}, {frameResize, 0, 80, 0, 24}, {frameResize}, {0}, {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		fr, ok, err := parseClientFrame(msg)
		switch {
		case err != nil && ok:
			t.Fatal("a frame and an error")
		case ok && fr.code == frameStdin && !bytes.Equal(fr.stdin, msg[1:]):
			t.Fatal("stdin payload altered")
		case ok && fr.code == frameResize && len(msg) != 5:
			t.Fatal("a resize of the wrong length accepted")
		case ok && fr.code != frameStdin && fr.code != frameResize:
			t.Fatalf("code %d accepted", fr.code)
		}
	})
}

// FuzzShellQuery: any query string parses or errs, and an accepted one has a command,
// a service and a pod index in range.
func FuzzShellQuery(f *testing.F) {
	f.Add("cmd0=sh&cmd1=-c&cmd2=ls&tty=1&stdin=1&service=web&podIndex=0")
	f.Add("cmd0=&service=web&podIndex=0x10")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		r, err := parseShellQuery(q)
		if err == nil && (len(r.Command) == 0 || r.Service == "" || r.PodIndex < 0) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// FuzzStreamParams: any logs or events query parses or errs, and an accepted one names
// only the lease's services, no negative tail, and not previous with follow.
func FuzzStreamParams(f *testing.F) {
	f.Add("service=web&follow=true&tail=5")
	f.Add("previous=true&tail=-1")
	f.Add("previous=1&follow=t&service=web,db")
	g := market.ManifestGroup{Name: "g", Services: []market.Service{{Name: "web"}, {Name: "db"}}}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest(http.MethodGet, "/lease/1/1/1/logs", http.NoBody)
		r.URL.RawQuery = raw
		o, err := streamParams(r, &g)
		if err != nil {
			return
		}
		for _, s := range o.Services {
			if s != "web" && s != "db" {
				t.Fatalf("accepted service %q", s)
			}
		}
		if o.TailLines != nil && *o.TailLines < 0 || o.Previous && o.Follow {
			t.Fatalf("accepted %+v", o)
		}
	})
}
