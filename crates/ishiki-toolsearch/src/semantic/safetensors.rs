//! The model's weights in the safetensors format (an 8-byte little-endian header length, a JSON
//! header naming each tensor's dtype, shape and byte range, then the raw data), read with the
//! `safetensors` crate under this file's size limits. Only `F32` tensors are kept
//! (all-MiniLM-L6-v2 ships in f32); others are skipped, so a stored `I64` buffer such as
//! `position_ids` does no harm.

use std::collections::HashMap;
use std::path::Path;

use super::{content_hash, model_error};
use crate::error::ToolsearchError;

/// Largest weights file read (all-MiniLM-L6-v2 is 91 MB).
const MAX_FILE_BYTES: u64 = 2 << 30;
/// Largest JSON header read.
const MAX_HEADER_BYTES: u64 = 16 << 20;

/// An f32 tensor: its shape and its values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tensor {
    pub(crate) shape: Vec<usize>,
    pub(crate) data: Vec<f32>,
}

/// Every f32 tensor of the file at `path`, by name, and a hash of the file's bytes.
pub(crate) fn load(path: &Path) -> Result<(HashMap<String, Tensor>, u64), ToolsearchError> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| model_error(format!("cannot read {shown}: {e}")))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(model_error(format!(
            "{shown} is {size} bytes, more than the {MAX_FILE_BYTES} read"
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| model_error(format!("cannot read {shown}: {e}")))?;
    let tensors = parse(&bytes).map_err(|e| model_error(format!("{shown}: {e}")))?;
    Ok((tensors, content_hash(0, &bytes)))
}

/// The f32 tensors of a safetensors file's bytes, read with the `safetensors` crate (which
/// checks the header, the offsets and that each tensor's bytes match its dtype and shape).
pub(crate) fn parse(bytes: &[u8]) -> Result<HashMap<String, Tensor>, String> {
    use ::safetensors::{Dtype, SafeTensorError as E, SafeTensors};
    if bytes.len() >= 8 {
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
        if header_len > MAX_HEADER_BYTES || header_len > (bytes.len() - 8) as u64 {
            return Err(format!(
                "safetensors header length {header_len} does not fit the file"
            ));
        }
    }
    let file = SafeTensors::deserialize(bytes).map_err(|e| match e {
        E::HeaderTooSmall => {
            "not a safetensors file: shorter than its 8-byte header length".to_owned()
        }
        E::InvalidHeaderLength | E::HeaderTooLarge => {
            "safetensors header length does not fit the file".to_owned()
        }
        E::InvalidHeaderStart | E::InvalidHeaderDeserialization(_) | E::InvalidHeader(_) => {
            format!("safetensors header is not a json object: {e}")
        }
        E::InvalidOffset(name) => format!("tensor {name:?} has data offsets outside the file"),
        E::TensorInvalidInfo | E::ValidationOverflow => {
            "a tensor's shape and dtype do not match its data offsets, or they lie outside the file"
                .to_owned()
        }
        E::MetadataIncompleteBuffer => {
            "the tensors' data offsets do not cover the file's data".to_owned()
        }
        other => format!("not a valid safetensors file: {other}"),
    })?;
    let mut tensors = HashMap::new();
    for (name, view) in file.tensors() {
        if view.dtype() != Dtype::F32 {
            continue;
        }
        let values = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        tensors.insert(
            name,
            Tensor {
                shape: view.shape().to_vec(),
                data: values,
            },
        );
    }
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn reads_f32_tensors_and_skips_other_dtypes() {
        let mut data = Vec::new();
        for v in [1.0f32, 2.0, 3.0, -0.5] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        data.extend_from_slice(&7i64.to_le_bytes());
        let header = r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"ids":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}}"#;
        let tensors = parse(&file(header, &data)).expect("valid file");
        assert_eq!(tensors.len(), 1);
        assert_eq!(tensors["w"].shape, [2, 2]);
        assert_eq!(tensors["w"].data, [1.0, 2.0, 3.0, -0.5]);
    }

    #[test]
    fn broken_files_are_errors_that_name_the_problem() {
        let cases: [(Vec<u8>, &str); 5] = [
            (vec![1, 2, 3], "shorter than its 8-byte header length"),
            (u64::MAX.to_le_bytes().to_vec(), "does not fit the file"),
            (file("[1]", &[]), "not a json object"),
            (
                file(
                    r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}"#,
                    &[0; 8],
                ),
                "do not match its data offsets, or they lie outside the file",
            ),
            (
                file(
                    r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                    &[0; 8],
                ),
                "shape and dtype do not match its data offsets",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse(&bytes).expect_err(want);
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
