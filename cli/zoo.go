package cli

// The model zoo's builders (vit, ...) register themselves with train.NewModel, so --model takes
// them and predict, export and --resume rebuild their checkpoints.
import _ "github.com/stoke-ml/stoke/models"
