{{- /* One field as a list item: name, type, required, default; its doc comment; its validation. */ -}}
{{- define "field" -}}
{{- $field := . -}}
- **`{{ $field.Name }}`** _{{ markdownRenderType $field.Type }}_
{{- if or (index $field.Markers "required") (index $field.Markers "kubebuilder:validation:Required") }}, required{{ end }}
{{- with (index $field.Markers "kubebuilder:default") }}, default `{{ (last .).Value | toJson }}`{{ end }}
{{- if eq $field.Name "metadata" }}

  Standard object metadata.
{{- else if $field.Doc }}

  {{ template "prose" ($field.Doc | replace "\n" "\n  ") }}
{{- end }}
{{- $checks := list }}
{{- range $name, $values := $field.Markers }}
{{- if and (hasPrefix "kubebuilder:validation:" $name) (not (has $name (list "kubebuilder:validation:XValidation" "kubebuilder:validation:Optional" "kubebuilder:validation:Required"))) }}
{{- $value := last $values }}
{{- $short := trimPrefix "kubebuilder:validation:" $name }}
{{- if eq $short "Enum" }}
{{- $values := list }}{{ range $value }}{{ $values = append $values (printf "`%v`" .) }}{{ end }}
{{- $checks = append $checks (printf "one of %s" (join ", " $values)) }}
{{- else if eq $short "Pattern" }}
{{- $checks = append $checks (printf "matches `%v`" $value) }}
{{- else if eq $short "items:Pattern" }}
{{- $checks = append $checks (printf "each item matches `%v`" $value) }}
{{- else if eq $short "Format" }}
{{- $checks = append $checks (printf "format `%v`" $value) }}
{{- else }}
{{- $checks = append $checks (printf "%s %v" ($short | kebabcase | replace "-" " ") $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Rules of the field's own type are listed with that type, not again on every field of it. */ -}}
{{- $rules := index $field.Markers "kubebuilder:validation:XValidation" }}
{{- if and $rules (eq (toJson $rules) (toJson (index $field.Type.Markers "kubebuilder:validation:XValidation"))) }}
{{- $rules = list }}
{{- end }}
{{- if or $checks $rules }}

  Validation:
{{- range $checks }}
  - {{ . }}
{{- end }}
{{- range $rules }}
  - {{ template "rule" . }}
{{- end }}
{{- end }}
{{- end -}}
