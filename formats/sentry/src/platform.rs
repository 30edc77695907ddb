//! Relay's profile type of a platform (`relay-profiling` `ProfileType`): one
//! answer for the item-header check, the chunk's data category and the
//! exporter's rate limits.

/// Whether a profile came from a UI platform or a backend one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileType {
    /// `cocoa`, `android`, `javascript` (browser): counted as `profile_chunk_ui`.
    Ui,
    /// Every other platform: counted as `profile_chunk`.
    Backend,
}

impl ProfileType {
    /// Relay's `ProfileType::from_platform`.
    pub fn from_platform(platform: &str) -> Self {
        match platform {
            "cocoa" | "android" | "javascript" => Self::Ui,
            _ => Self::Backend,
        }
    }

    /// The data category a chunk of this type counts in (rate limits,
    /// client reports).
    pub fn chunk_category(self) -> &'static str {
        match self {
            Self::Ui => "profile_chunk_ui",
            Self::Backend => "profile_chunk",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ui => "ui",
            Self::Backend => "backend",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_platforms_have_their_own_category() {
        for p in ["cocoa", "android", "javascript"] {
            assert_eq!(ProfileType::from_platform(p), ProfileType::Ui, "{p}");
        }
        for p in ["python", "node", "go", "java", "native", ""] {
            assert_eq!(ProfileType::from_platform(p), ProfileType::Backend, "{p}");
        }
        assert_eq!(ProfileType::Ui.chunk_category(), "profile_chunk_ui");
        assert_eq!(ProfileType::Backend.chunk_category(), "profile_chunk");
    }
}
