package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag adds -o to cmd.
func outputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", outputTable, "Output format: table, json or yaml")
}

func checkOutput(format string) error {
	switch format {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", format)
}

// printDocument writes v as JSON or YAML. API objects get their apiVersion and kind first: the client leaves
// them empty on typed objects, and a document without them cannot be applied again.
func printDocument(w io.Writer, format string, v any) error {
	if obj, ok := v.(runtime.Object); ok {
		if s, err := Scheme(); err == nil {
			if gvk, err := apiutil.GVKForObject(obj, s); err == nil {
				obj.GetObjectKind().SetGroupVersionKind(gvk)
			}
		}
	}
	var b []byte
	var err error
	if format == outputJSON {
		b, err = json.MarshalIndent(v, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	_, err = w.Write(b)
	return err
}

// messages is where a command's human-readable lines go: stdout for the table format, stderr with -o json|yaml,
// so that stdout holds exactly one document a script can parse.
func (o *Options) messages(format string) io.Writer {
	if format == outputTable {
		return o.Streams.Out
	}
	return o.Streams.ErrOut
}
