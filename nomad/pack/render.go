// Package pack holds the etcd Nomad Pack (etcd/ beside this file), whose
// job template is the one text of the Nomad job: nomad-pack renders it
// with the pack's variables, and 'etcd-nomad job render' renders it with
// a cluster definition's values (Job). Render renders the whole pack as
// nomad-pack does, for the tests that compare the two and run the pack on
// Nomad. nomad-pack itself is not served by the Go module proxy here
// (v0.2.0 to v0.4.x: 403), so it cannot be pinned and built with the other
// tools; this follows its renderer (renderer.go, template_context.go and
// funcs.go of nomad-pack v0.4): text/template with "[[" "]]" delimiters,
// Sprig's text functions, toStringList, the var function over the pack's
// variables (whole numbers as int, lists as []any), missingkey=zero and
// "<no value>" erased.
package pack

import (
	_ "embed"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// jobTemplate is the pack's job template, the job 'etcd-nomad job render'
// writes too.
//
//go:embed etcd/templates/etcd.nomad.tpl
var jobTemplate string

// Job renders the pack's job template with vals instead of the pack's
// variables and helpers: var "k" is vals[k], and each template "etcd.k"
// the job calls is vals[k] too. A value the template reads and vals lacks
// is an error, never an empty string.
func Job(vals map[string]any) (string, error) {
	funcs := funcMap()
	funcs["var"] = func(k string, c packContext) (any, error) {
		if v, ok := c.vars[k]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("the job template reads %q, which has no value", k)
	}
	tpl := template.New("etcd.nomad.tpl").Funcs(funcs).Delims("[[", "]]").Option("missingkey=error")
	for k := range vals {
		if _, err := tpl.New("etcd." + k).Parse(fmt.Sprintf("[[ var %q . ]]", k)); err != nil {
			return "", fmt.Errorf("value %q: %w", k, err)
		}
	}
	if _, err := tpl.Parse(jobTemplate); err != nil {
		return "", fmt.Errorf("parse the job template: %w", err)
	}
	var b strings.Builder
	if err := tpl.Execute(&b, packContext{vars: vals}); err != nil {
		return "", fmt.Errorf("render the job template: %w", err)
	}
	return b.String(), nil
}

// Render renders the pack in dir as nomad-pack does, with the variables'
// defaults from variables.hcl and overrides over them, and returns its one
// job template's output.
func Render(dir string, overrides map[string]any) (string, error) {
	vars, err := defaults(filepath.Join(dir, "variables.hcl"))
	if err != nil {
		return "", err
	}
	for k, v := range overrides {
		if _, ok := vars[k]; !ok {
			return "", fmt.Errorf("variable %q is not declared in %s/variables.hcl", k, dir)
		}
		vars[k] = v
	}
	funcs := funcMap()
	// A variable not declared renders as "", as nomad-pack's var does.
	funcs["var"] = func(k string, c packContext) any {
		if v, ok := c.vars[k]; ok {
			return v
		}
		return ""
	}
	tpl := template.New("pack").Funcs(funcs).Delims("[[", "]]").Option("missingkey=zero")
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*.tpl"))
	if err != nil {
		return "", err
	}
	var jobTpl string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		name := filepath.Base(f)
		if _, err := tpl.New(name).Parse(string(src)); err != nil {
			return "", fmt.Errorf("parse %s: %w", f, err)
		}
		if strings.HasSuffix(name, ".nomad.tpl") {
			jobTpl = name
		}
	}
	if jobTpl == "" {
		return "", fmt.Errorf("%s/templates: no *.nomad.tpl", dir)
	}
	var b strings.Builder
	if err := tpl.ExecuteTemplate(&b, jobTpl, packContext{vars: vars}); err != nil {
		return "", fmt.Errorf("render %s: %w", jobTpl, err)
	}
	return strings.ReplaceAll(b.String(), "<no value>", ""), nil
}

// funcMap is what nomad-pack gives a template besides var: Sprig's text
// functions and toStringList.
func funcMap() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	funcs["toStringList"] = toStringList
	return funcs
}

// packContext stands for nomad-pack's PackTemplateContext: templates pass
// it (".") to var.
type packContext struct{ vars map[string]any }

// toStringList is nomad-pack's: a list as an HCL list of quoted strings.
func toStringList(l any) (string, error) {
	var out strings.Builder
	out.WriteRune('[')
	switch tl := l.(type) {
	case []any:
		for i, v := range tl {
			if i > 0 {
				out.WriteString(", ")
			}
			fmt.Fprintf(&out, "%q", v)
		}
	default:
		fmt.Fprintf(&out, "%q", l)
	}
	out.WriteRune(']')
	return out.String(), nil
}

// defaults reads the variables' defaults from variables.hcl, converted to
// Go values as nomad-pack converts them (whole numbers to int).
func defaults(path string) (map[string]any, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	vars := map[string]any{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "variable" || len(b.Labels) != 1 {
			return nil, fmt.Errorf("%s: unexpected block %s %v", b.Range(), b.Type, b.Labels)
		}
		for _, need := range []string{"description", "type", "default"} {
			if _, ok := b.Body.Attributes[need]; !ok {
				return nil, fmt.Errorf("%s: variable %q has no %s", b.Range(), b.Labels[0], need)
			}
		}
		v, diags := b.Body.Attributes["default"].Expr.Value(nil)
		if diags.HasErrors() {
			return nil, diags
		}
		vars[b.Labels[0]] = goValue(v)
	}
	return vars, nil
}

func goValue(v cty.Value) any {
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString()
	case t == cty.Bool:
		return v.True()
	case t == cty.Number:
		if i, acc := v.AsBigFloat().Int64(); acc == big.Exact {
			return int(i)
		}
		f, _ := v.AsBigFloat().Float64()
		return f
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, goValue(e))
		}
		return out
	}
	panic(fmt.Sprintf("variable type %s not handled", t.FriendlyName()))
}
