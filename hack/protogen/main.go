// Command protogen generates berth's Go code from api/**/*.proto without protoc: it
// compiles the files with protocompile (a pure-Go protobuf compiler) and runs the
// protoc-gen-go and protoc-gen-go-grpc plugins (paths given as flags) on them, the
// way protoc would. Run it through `make generate`.
//
//	protogen -root api -out api -go PATH -go-grpc PATH provider/v1/provider.proto
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	root := flag.String("root", "api", "import root of the .proto files")
	out := flag.String("out", "api", "where generated files go (beside their .proto files when it is -root)")
	goPlugin := flag.String("go", "", "path of protoc-gen-go")
	grpcPlugin := flag.String("go-grpc", "", "path of protoc-gen-go-grpc")
	flag.Parse()
	if err := run(*root, *out, *goPlugin, *grpcPlugin, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(root, out, goPlugin, grpcPlugin string, files []string) error {
	if len(files) == 0 || goPlugin == "" || grpcPlugin == "" {
		return fmt.Errorf("usage: protogen -root DIR -out DIR -go PATH -go-grpc PATH FILE.proto...")
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		return err
	}
	// The request lists every file the generated ones depend on, dependencies first.
	var protos []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		protos = append(protos, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	for _, plugin := range []struct{ path, param string }{{goPlugin, "paths=source_relative"}, {grpcPlugin, "paths=source_relative,require_unimplemented_servers=true"}} {
		req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: proto.String(plugin.param), ProtoFile: protos}
		if err := generate(plugin.path, req, out); err != nil {
			return err
		}
	}
	return nil
}

func generate(plugin string, req *pluginpb.CodeGeneratorRequest, out string) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(plugin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", plugin, err, stderr.String())
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return fmt.Errorf("%s: %w", plugin, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s", plugin, resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(out, f.GetName())
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
