//! Readable messages for serde-saphyr's budget errors (issue 13): its own text is
//! `budget breached: Nodes { nodes: 250001 }`; ours names the limit in words. Shared by the
//! profile and `models.yaml` decoding here and the scenario file in `ishiki-cli`.

use serde_saphyr::budget::BudgetBreach;

/// The message for a YAML error that is a budget breach, or `None` for any other error.
#[doc(hidden)]
pub fn yaml_budget_message(error: &serde_saphyr::Error) -> Option<String> {
    let mut error = error;
    while let serde_saphyr::Error::WithSnippet { error: inner, .. }
    | serde_saphyr::Error::AliasError { error: inner, .. } = error
    {
        error = inner;
    }
    let serde_saphyr::Error::Budget { breach, .. } = error else {
        return None;
    };
    let limits = serde_saphyr::Budget::default();
    let problem = match breach {
        BudgetBreach::Events { .. } => {
            format!("it has more than {} parser events", limits.max_events)
        }
        BudgetBreach::Aliases { .. } => {
            format!("it uses more than {} aliases (*name)", limits.max_aliases)
        }
        BudgetBreach::Anchors { .. } => {
            format!(
                "it defines more than {} anchors (&name)",
                limits.max_anchors
            )
        }
        BudgetBreach::Depth { .. } => format!("it nests deeper than {} levels", limits.max_depth),
        BudgetBreach::Documents { .. } => {
            format!("it holds more than {} documents", limits.max_documents)
        }
        BudgetBreach::Nodes { .. } => format!(
            "it has more than {} values (mappings, lists and scalars)",
            limits.max_nodes
        ),
        BudgetBreach::ScalarBytes { .. } => format!(
            "its text values are larger than {} bytes together",
            limits.max_total_scalar_bytes
        ),
        BudgetBreach::MergeKeys { .. } => {
            format!(
                "it uses more than {} merge keys (<<)",
                limits.max_merge_keys
            )
        }
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => format!(
            "it uses its anchors too often ({aliases} aliases of {anchors} anchors), which would expand it enormously"
        ),
        BudgetBreach::InputBytes { .. } => match limits.max_reader_input_bytes {
            Some(max) => format!("it is larger than {max} bytes"),
            None => "it is too large".to_owned(),
        },
        _ => "it is too large or too deeply nested".to_owned(),
    };
    Some(format!("the YAML document is over a size limit: {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_budget_breach_reads_as_a_size_limit() {
        let yaml = format!("[{}]", vec!["1"; 300_000].join(","));
        let error = serde_saphyr::from_str::<serde_json::Value>(&yaml).expect_err("over budget");
        assert_eq!(
            yaml_budget_message(&error).as_deref(),
            Some(
                "the YAML document is over a size limit: it has more than 250000 values (mappings, lists and scalars)"
            )
        );
        let plain = serde_saphyr::from_str::<serde_json::Value>("a: [").expect_err("broken");
        assert_eq!(yaml_budget_message(&plain), None);
    }
}
