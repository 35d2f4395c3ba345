public enum ReactorCorePlaceholder {}
