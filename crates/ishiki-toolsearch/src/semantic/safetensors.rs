//! A reader for the safetensors format the model's weights come in: an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
//! data. Only `F32` tensors are read (all-MiniLM-L6-v2 ships in f32); others are skipped, so a
//! stored `I64` buffer such as `position_ids` does no harm. Written by hand: the format is a
//! page long and the crates that read it bring more than they save.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

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

/// The f32 tensors of a safetensors file's bytes.
pub(crate) fn parse(bytes: &[u8]) -> Result<HashMap<String, Tensor>, String> {
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or("not a safetensors file: shorter than its 8-byte header length")?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_BYTES || header_len > (bytes.len() - 8) as u64 {
        return Err(format!(
            "safetensors header length {header_len} does not fit the file"
        ));
    }
    let data_start = 8 + header_len as usize;
    let header: Value = serde_json::from_slice(&bytes[8..data_start])
        .map_err(|e| format!("safetensors header is not valid json: {e}"))?;
    let header = header
        .as_object()
        .ok_or("safetensors header is not a json object")?;
    let data = &bytes[data_start..];
    let mut tensors = HashMap::new();
    for (name, info) in header {
        if name == "__metadata__" || info["dtype"].as_str() != Some("F32") {
            continue;
        }
        let shape: Vec<usize> = info["shape"]
            .as_array()
            .ok_or_else(|| format!("tensor {name:?} has no shape"))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("tensor {name:?} has a shape that is not a list of sizes"))?;
        let offsets = info["data_offsets"].as_array().map(|o| {
            o.iter()
                .filter_map(|v| v.as_u64().and_then(|v| usize::try_from(v).ok()))
                .collect::<Vec<_>>()
        });
        let (start, end) = match offsets.as_deref() {
            Some(&[start, end]) if start <= end && end <= data.len() => (start, end),
            _ => return Err(format!("tensor {name:?} has data offsets outside the file")),
        };
        let count = shape
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(*d))
            .ok_or_else(|| format!("tensor {name:?} is too large"))?;
        if count.checked_mul(4) != Some(end - start) {
            return Err(format!(
                "tensor {name:?} of shape {shape:?} needs {count} floats, its data holds {} bytes",
                end - start
            ));
        }
        let values = data[start..end]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        tensors.insert(
            name.clone(),
            Tensor {
                shape,
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
                "data offsets outside the file",
            ),
            (
                file(
                    r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                    &[0; 8],
                ),
                "needs 3 floats, its data holds 8 bytes",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse(&bytes).expect_err(want);
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
